import { MARKER_VARIABLE, killMarkedProcesses } from '../process/process-tree';
import type { StopReason } from './outcome';
import type { ProcessExit, ProcessOutput, SpawnOptions, Spawner } from '../process/spawner';

export interface SupervisorOptions {
  spawner: Spawner;
  /** Its `env` must carry the run's marker, `HEADLESS_TASK_ID`. */
  spawn: SpawnOptions;
  /** The watchdog: the run is stopped with reason `timeout` after this long. */
  timeoutMs: number;
  /** Between SIGTERM and SIGKILL when the watchdog stops the run. */
  killGraceMs: number;
}

export interface ProcessEnd extends ProcessExit {
  /** Set when the spawner lost track of the process instead of reporting its exit. */
  lost?: unknown;
}

export interface SupervisedProcess {
  pid: number;
  startTime?: string;
  /** The reason of the first stop, if any. */
  readonly stopReason: StopReason | undefined;
  /** The output so far, if the spawner can tell. */
  output(): ProcessOutput | undefined;
  /**
   * Stops the run: SIGTERM to its group, SIGKILL after `graceMs` (at once with 0). Only the
   * first stop counts; returns false for any later one and once the process has ended.
   */
  stop(reason: StopReason, graceMs: number): boolean;
  /**
   * Settles once the process has exited and its output is drained, after whatever is left of
   * the run (its process group, and every process carrying its marker, even one that left the
   * group) has been killed. Never rejects.
   */
  ended: Promise<ProcessEnd>;
}

/**
 * Starts a run's process and watches it: the watchdog, stops, and the reaping of leftovers
 * after exit. Reaping is done here, not in the spawner, so a custom spawner keeps it.
 * Rejects as the spawner does when the process cannot be started.
 */
export async function superviseProcess(o: SupervisorOptions): Promise<SupervisedProcess> {
  const child = await o.spawner(o.spawn);
  const marker = o.spawn.env[MARKER_VARIABLE];
  const timers: NodeJS.Timeout[] = [];
  let stopReason: StopReason | undefined;
  let running = true;

  const reap = () => {
    running = false;
    for (const timer of timers) clearTimeout(timer);
    child.kill('SIGKILL');
    if (marker) killMarkedProcesses(new Set([marker]));
  };
  const ended = child.exit.then(
    (exit): ProcessEnd => {
      reap();
      return exit;
    },
    (lost: unknown): ProcessEnd => {
      reap();
      return { exitCode: null, signal: null, stdout: '', stderr: '', truncated: false, lost };
    },
  );

  const supervised: SupervisedProcess = {
    pid: child.pid,
    startTime: child.startTime,
    get stopReason() {
      return stopReason;
    },
    output: () => child.output?.(),
    stop(reason, graceMs) {
      if (stopReason !== undefined || !running) return false;
      stopReason = reason;
      child.kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
      if (graceMs > 0) timers.push(setTimeout(() => child.kill('SIGKILL'), graceMs));
      return true;
    },
    ended,
  };
  timers.push(setTimeout(() => supervised.stop('timeout', o.killGraceMs), o.timeoutMs));
  return supervised;
}
