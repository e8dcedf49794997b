import { shownText } from '../util/text';
import { clip } from '../util/text';
import type { RunError } from '../../contract/records';
import { type FinishStatus, INTERRUPTED } from './transitions';

/**
 * Why the service stopped a run, and what the run then ended as: each stop carries its own status
 * and error, so a new guard (runs/guards.ts) is one more stop, not one more case here. The
 * first stop to act is the one that counts.
 */
export interface RunStop {
  /** `cancel`, `shutdown`, `unrecorded`, or a guard's name (`timeout`). */
  reason: string;
  status: FinishStatus;
  error?: RunError;
}

/** The stops the service asks for itself; guards make their own. */
export const STOPS = {
  cancel: { reason: 'cancel', status: 'cancelled' },
  /** Its agent sent an answer that matches its outputSchema: the run is done (docs/structured-output.md). */
  result: { reason: 'result', status: 'succeeded' },
  shutdown: { reason: 'shutdown', status: 'interrupted', error: INTERRUPTED },
  unrecorded: {
    reason: 'unrecorded',
    status: 'failed',
    error: { code: 'storage_unavailable', message: 'The store refused the run record once the agent had started, so the run was stopped.' },
  },
} as const satisfies Record<string, RunStop>;

export interface OutcomeInput {
  exitCode: number | null;
  signal: string | null;
  /** The service's stop, if it stopped the run. */
  stop?: RunStop;
  /** A failure of the service around the process (spawn failed, process lost). */
  runtimeError?: RunError;
  /** The agent's own verdict from its output: set when it reported a failure. */
  agentError?: string;
  /** What the agent printed last on stderr, for a failure it gave no reason for in its output. */
  stderr?: string;
}

export interface Outcome {
  status: FinishStatus;
  error?: RunError;
}

/**
 * A run's final status and error. A stop by the service decides first (it is why the process
 * ended), then a runtime failure, then the process: exit 0 with no failure reported by the
 * agent is `succeeded`, anything else `failed`.
 */
export function judgeOutcome(input: OutcomeInput): Outcome {
  if (input.stop) return { status: input.stop.status, ...(input.stop.error ? { error: input.stop.error } : {}) };
  if (input.runtimeError) return { status: 'failed', error: input.runtimeError };
  if (input.exitCode === 0 && !input.agentError) return { status: 'succeeded' };
  const reason = input.agentError || reasonFromStderr(input.stderr ?? '');
  const because = reason ? `: ${reason}` : '.';
  if (input.exitCode === null) {
    return { status: 'failed', error: { code: 'signal', message: `The agent was killed by ${input.signal ?? 'a signal'}${because}` } };
  }
  if (input.exitCode !== 0) return { status: 'failed', error: { code: 'exit_code', message: `The agent exited with code ${input.exitCode}${because}` } };
  return { status: 'failed', error: { code: 'agent_error', message: input.agentError || 'The agent reported a failure.' } };
}

// "No models available … /login" is pi's: without it, its last line is only a docs path.
const SAYS_WHY =
  /error|fail|invalid|denied|unauthori[sz]ed|forbidden|not found|missing|must|cannot|can't|refused|no such|no \w+ available|not configured|\/login/i;
const MAX_REASON = 500;

/**
 * The line of an agent's stderr that says why it failed: the last one that reads like a reason
 * (an error, a refusal, something missing), else the last line with words. Colours and stack
 * frames removed, bounded.
 */
export function reasonFromStderr(stderr: string): string | undefined {
  // A Rust program's backtrace (RUST_BACKTRACE=1) follows its message.
  const [message = ''] = shownText(stderr).split(/^Stack backtrace:$/m);
  const lines = message
    .split(/\r?\n/)
    .map((line) => line.trim())
    // Stack frames and lone brackets say nothing about why.
    .filter((line) => /\w/.test(line) && !/^at\s/.test(line));
  const line = lines.findLast((l) => SAYS_WHY.test(l)) ?? lines.at(-1);
  return line === undefined ? undefined : clip(line, MAX_REASON);
}
