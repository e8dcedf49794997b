/**
 * @module A placement's setup (placement.ts `PlacedSetup`), run before the run's agent through
 * the run's own spawner: confined as its agent is, supervised by a watchdog of its own timeout,
 * reaped by its host when it ends.
 */
import type { ProcessHost } from '../process/process-host';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { clip } from '../util/text';
import { watchdog } from './guards';
import type { PlacedSetup } from './placement';
import { type SupervisedProcess, superviseProcess } from './supervisor';

/** Between SIGTERM and SIGKILL when a setup is stopped. */
const SETUP_KILL_GRACE_MS = 2000;
/** Goes to its folder inside whatever confines it (a sandbox starts in the run's own folder), then runs the command. */
const IN_FOLDER = 'cd "$1" && exec sh -c "$2"';

export interface SetupInput {
  setup: PlacedSetup;
  spawner: Spawner;
  host: ProcessHost;
  run: { taskId: string; data?: unknown };
  /** The run's environment (its marker included). */
  env: Record<string, string>;
  /** Its process, once started: the run's stops stop it. */
  started(proc: SupervisedProcess): void;
}

/** Runs the setup: the placement's data once it succeeded; a SpawnFailure with its code once it failed (and the placement undid itself). */
export async function runPlacedSetup(o: SetupInput): Promise<unknown> {
  const { setup } = o;
  let proc: SupervisedProcess;
  try {
    proc = await superviseProcess({
      spawner: o.spawner,
      host: o.host,
      run: o.run,
      guards: [watchdog(setup.timeoutMs)],
      killGraceMs: SETUP_KILL_GRACE_MS,
      spawn: { command: 'sh', args: ['-c', IN_FOLDER, 'setup', setup.cwd, setup.command], cwd: setup.cwd, env: { ...o.env, ...setup.env } },
    });
  } catch (error) {
    await setup.failed();
    throw error;
  }
  o.started(proc);
  const end = await proc.ended;
  if (end.exitCode === 0 && proc.stopped === undefined) return setup.succeeded();
  await setup.failed();
  const stop = proc.stopped;
  const why = stop
    ? stop.reason === 'timeout'
      ? `did not finish within ${setup.timeoutMs} ms`
      : `was stopped (${stop.reason})`
    : `exited with ${end.exitCode ?? end.signal}`;
  throw new SpawnFailure(`${setup.what} ${why}: ${clip(`${end.stdout}${end.stderr}`.trim(), 500)}`, setup.failureCode);
}
