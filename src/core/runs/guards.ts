/**
 * @module The supervisor's guards: each watches one running process and may stop it, with a stop
 * of its own (outcome.ts `RunStop`). The wall-clock watchdog is one; a stall, budget or memory
 * guard is one more entry in the list a run is supervised with.
 */
import type { RunBudget, RunUsage } from '../../contract/records';
import type { AgentEvent } from '../agents/types';
import type { RunStop } from './outcome';

/** What a guard sees of the run it watches, and how it stops it. */
export interface GuardContext {
  /** The run's process (bubblewrap, for a sandboxed run): everything below it is the run's. */
  pid: number;
  /** The resident memory of the run's processes, in bytes, as its placement's host reads it. */
  memory(): Promise<number>;
  /** Stops the run (SIGTERM, SIGKILL after the grace); only the first stop counts. */
  stop(stop: RunStop): void;
  /** Calls `listener` with each line the agent prints on stdout. */
  onLine(listener: (line: string) => void): void;
  /** Calls `listener` with each event the agent's output meant (a tool call, its usage so far). */
  onEvent(listener: (event: AgentEvent) => void): void;
  /** Calls `listener` when the run starts and stops waiting on a caller (a permission question). */
  onWaiting(listener: (waiting: boolean) => void): void;
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

/** How often a memory ceiling samples the run's processes. */
export const MEMORY_SAMPLE_MS = 1000;

/** A stall: nothing on stdout for `stallMs`, though the process runs; a run waiting on a caller is not stalled. */
export function stallGuard(stallMs: number): Guard {
  const stop: RunStop = {
    reason: 'stall',
    status: 'timed_out',
    error: { code: 'stalled', message: `Stopped: the agent printed nothing for ${stallMs} ms.` },
  };
  return (run) => {
    let ended = false;
    let waiting = false;
    let timer = setTimeout(() => run.stop(stop), stallMs);
    run.onLine(() => {
      if (!waiting) timer.refresh();
    });
    run.onWaiting((now) => {
      if (ended) return;
      waiting = now;
      clearTimeout(timer);
      if (!now) timer = setTimeout(() => run.stop(stop), stallMs);
    });
    return () => {
      ended = true;
      clearTimeout(timer);
    };
  };
}

/** A memory ceiling: the resident memory of the run's process and all below it, sampled, over `maxMb`. */
export function memoryGuard(maxMb: number, everyMs = MEMORY_SAMPLE_MS): Guard {
  return (run) => {
    // One reading at a time: a slow host's samples never pile up.
    let reading = false;
    const sample = async () => {
      const usedMb = (await run.memory()) / 1024 / 1024;
      if (usedMb <= maxMb) return;
      run.stop({
        reason: 'memory',
        status: 'failed',
        error: { code: 'memory_limit', message: `Stopped: its processes used ${Math.round(usedMb)} MB, over its ceiling of ${maxMb} MB.` },
      });
    };
    const timer = setInterval(() => {
      if (reading) return;
      reading = true;
      // A reading the host could not make is skipped: the next one comes.
      void sample()
        .catch(() => undefined)
        .finally(() => {
          reading = false;
        });
    }, everyMs);
    return () => clearInterval(timer);
  };
}

/** Throws, naming where, on a guard setting that cannot work (a library caller's typo). */
export function checkGuards(settings: { stallTimeoutMs?: number; maxMemoryMb?: number; minFreeMemoryMb?: number }, where: string): void {
  for (const [name, value] of Object.entries(settings)) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1)) throw new Error(`${where}${name} must be a whole number of at least 1, not ${value}`);
  }
}

/** What passes a budget's limit, said as the run's error; undefined while within it. */
function overBudget(budget: RunBudget, turns: number, usage: RunUsage | undefined): string | undefined {
  if (budget.maxTurns !== undefined && turns > budget.maxTurns) return `Stopped: it started tool call ${turns}, over its maxTurns of ${budget.maxTurns}.`;
  const tokens = usage === undefined ? 0 : usage.inputTokens + usage.outputTokens;
  if (budget.maxTokens !== undefined && tokens >= budget.maxTokens) return `Stopped: it used ${tokens} tokens, reaching its maxTokens of ${budget.maxTokens}.`;
  const cost = usage?.costUsd;
  if (budget.maxCostUsd !== undefined && cost !== undefined && cost >= budget.maxCostUsd) {
    return `Stopped: it spent $${cost.toFixed(4)}, reaching its maxCostUsd of $${budget.maxCostUsd}.`;
  }
  return undefined;
}

/**
 * A run's budget, watched from its events: each tool call it starts is a turn (`toolCalls` were
 * started by its turns before this process); its usage is what the agent reports so far, over
 * every turn (an agent that reports only at its end is stopped by its own flags, where it has
 * them). Passing a limit stops it `failed`, `budget_exceeded`.
 */
export function budgetGuard(budget: RunBudget, toolCalls = 0): Guard {
  return (run) => {
    let turns = toolCalls;
    let usage: RunUsage | undefined;
    run.onEvent((event) => {
      if (event.type === 'tool' && event.status === 'started') turns += 1;
      if (event.type === 'usage') usage = event.usage;
      const over = overBudget(budget, turns, usage);
      if (over) run.stop({ reason: 'budget', status: 'failed', error: { code: 'budget_exceeded', message: over } });
    });
    return () => undefined;
  };
}
