import type { RunError, RunStatus } from './types';

/** Why the service stopped a run; the first stop to act is the one that counts. */
export type StopReason = 'cancel' | 'timeout' | 'shutdown' | 'unrecorded';

export interface OutcomeInput {
  exitCode: number | null;
  signal: string | null;
  stopReason?: StopReason;
  /** A failure of the service around the process (spawn failed, process lost). */
  runtimeError?: RunError;
  /** The agent's own verdict from its output: set when it reported a failure. */
  agentError?: string;
  timeoutMs: number;
}

export interface Outcome {
  status: Exclude<RunStatus, 'running'>;
  error?: RunError;
}

export const INTERRUPTED: RunError = {
  code: 'interrupted',
  message: 'The service stopped while the run was running; it was not re-run.',
};

/**
 * A run's final status and error. A stop by the service decides first (it is why the process
 * ended), then a runtime failure, then the process: exit 0 with no failure reported by the
 * agent is `succeeded`, anything else `failed`.
 */
export function judgeOutcome(input: OutcomeInput): Outcome {
  switch (input.stopReason) {
    case 'cancel':
      return { status: 'cancelled' };
    case 'timeout':
      return { status: 'timed_out', error: { code: 'timed_out', message: `Stopped by the watchdog after ${input.timeoutMs} ms.` } };
    case 'shutdown':
      return { status: 'interrupted', error: INTERRUPTED };
    case 'unrecorded':
      return {
        status: 'failed',
        error: { code: 'storage_unavailable', message: 'The store refused the run record once the agent had started, so the run was stopped.' },
      };
  }
  if (input.runtimeError) return { status: 'failed', error: input.runtimeError };
  if (input.exitCode === 0 && !input.agentError) return { status: 'succeeded' };
  if (input.exitCode === null) {
    return { status: 'failed', error: { code: 'signal', message: `The agent was killed by ${input.signal ?? 'a signal'}.` } };
  }
  if (input.exitCode !== 0) return { status: 'failed', error: { code: 'exit_code', message: `The agent exited with code ${input.exitCode}.` } };
  return { status: 'failed', error: { code: 'agent_error', message: input.agentError || 'The agent reported a failure.' } };
}
