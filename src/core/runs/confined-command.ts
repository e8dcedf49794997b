/**
 * @module A shell command the service runs for a run, as the run's agent runs (a placement's
 * setup, a verify loop's check): through the run's own spawner (confined alike: its sandbox,
 * network and user), under the run's marker, supervised by a watchdog of its own timeout, its
 * process group killed with the run and reaped by its host when it ends.
 */
import type { ProcessHost } from '../process/process-host';
import type { Spawner } from '../process/spawner';
import { watchdog } from './guards';
import type { RunStop } from './outcome';
import { type ProcessEnd, type SupervisedProcess, superviseProcess } from './supervisor';

/** Between SIGTERM and SIGKILL when such a command is stopped. */
const KILL_GRACE_MS = 2000;
/**
 * Goes to its folder inside whatever confines it (a sandbox starts in the run's own folder), then
 * runs the command; `merged`: its stderr joins its stdout, so its output reads as it came.
 */
const IN_FOLDER = 'cd "$1" && exec sh -c "$2"';
const IN_FOLDER_MERGED = 'cd "$1" && exec sh -c "$2" 2>&1';

export interface ConfinedCommand {
  /** `setup`, `check`: the name its shell is given (shown in `ps`). */
  what: string;
  command: string;
  cwd: string;
  timeoutMs: number;
  spawner: Spawner;
  host: ProcessHost;
  run: { taskId: string; data?: unknown };
  /** The run's environment (its marker included). */
  env: Record<string, string>;
  /** Its stderr joins its stdout. */
  merged?: boolean;
  /** `group`: the run's agent is alive beside it, so its end kills its own group only (supervisor.ts). @default "run" */
  leftovers?: 'run' | 'group';
  /** Its process, once started: the run's stops stop it. */
  started(proc: SupervisedProcess): void;
}

/** How it ended: its exit, its stop (its timeout, or the run's), and how long it took. */
export interface CommandEnd extends ProcessEnd {
  stopped: RunStop | undefined;
  durationMs: number;
}

/** Runs it to its end; throws only when it could not be started (a SpawnFailure). */
export async function runConfined(o: ConfinedCommand): Promise<CommandEnd> {
  const began = Date.now();
  const script = o.merged ? IN_FOLDER_MERGED : IN_FOLDER;
  const proc = await superviseProcess({
    spawner: o.spawner,
    host: o.host,
    run: o.run,
    guards: [watchdog(o.timeoutMs)],
    killGraceMs: KILL_GRACE_MS,
    ...(o.leftovers ? { leftovers: o.leftovers } : {}),
    spawn: { command: 'sh', args: ['-c', script, o.what, o.cwd, o.command], cwd: o.cwd, env: o.env },
  });
  o.started(proc);
  const end = await proc.ended;
  return { ...end, stopped: proc.stopped, durationMs: Date.now() - began };
}
