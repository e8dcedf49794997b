/**
 * @module The supervisor's guards: each watches one running process and may stop it, with a stop
 * of its own (outcome.ts `RunStop`). The wall-clock watchdog is one; a stall, budget or memory
 * guard is one more entry in the list a run is supervised with.
 */
import type { RunStop } from './outcome';

/** What a guard sees of the run it watches, and how it stops it. */
export interface GuardContext {
  /** Stops the run (SIGTERM, SIGKILL after the grace); only the first stop counts. */
  stop(stop: RunStop): void;
  /** Calls `listener` with each line the agent prints on stdout. */
  onLine(listener: (line: string) => void): void;
}

/** Starts watching; returns what ends the watch (called once the process has exited). */
export type Guard = (run: GuardContext) => () => void;

/** The watchdog's stop. */
export const timedOut = (timeoutMs: number): RunStop => ({
  reason: 'timeout',
  status: 'timed_out',
  error: { code: 'timed_out', message: `Stopped by the watchdog after ${timeoutMs} ms.` },
});

/** The wall-clock watchdog: the run is stopped `timed_out` after `timeoutMs`. */
export function watchdog(timeoutMs: number): Guard {
  const stop = timedOut(timeoutMs);
  return (run) => {
    const timer = setTimeout(() => run.stop(stop), timeoutMs);
    return () => clearTimeout(timer);
  };
}
