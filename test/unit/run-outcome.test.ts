import { describe, expect, it } from 'vitest';
import { timedOut } from '../../src/core/runs/guards';
import { type OutcomeInput, STOPS, judgeOutcome } from '../../src/core/runs/outcome';

const base: OutcomeInput = { exitCode: 0, signal: null };

describe('judgeOutcome: exit code + signal + stop reason + agent verdict → status and error', () => {
  it.each<[string, Partial<OutcomeInput>, string, string | undefined]>([
    ['exit 0, nothing reported', {}, 'succeeded', undefined],
    ['exit 0 but the agent reported a failure', { agentError: 'model refused' }, 'failed', 'agent_error'],
    ['exit 0 with an empty failure text', { agentError: '' }, 'succeeded', undefined],
    ['exit 3', { exitCode: 3 }, 'failed', 'exit_code'],
    ['exit 3 and an agent failure: the exit code is named', { exitCode: 3, agentError: 'x' }, 'failed', 'exit_code'],
    ['killed by a signal nobody asked for', { exitCode: null, signal: 'SIGSEGV' }, 'failed', 'signal'],
    ['a runtime failure', { exitCode: null, runtimeError: { code: 'spawn_failed', message: 'no such file' } }, 'failed', 'spawn_failed'],
    ['cancelled, whatever the exit', { exitCode: null, signal: 'SIGTERM', stop: STOPS.cancel }, 'cancelled', undefined],
    ['cancelled, even if it then exited 0', { stop: STOPS.cancel }, 'cancelled', undefined],
    ['the watchdog', { exitCode: null, signal: 'SIGKILL', stop: timedOut(1000) }, 'timed_out', 'timed_out'],
    ['the watchdog wins over an agent failure', { exitCode: 1, agentError: 'x', stop: timedOut(1000) }, 'timed_out', 'timed_out'],
    ['shutdown', { exitCode: null, signal: 'SIGTERM', stop: STOPS.shutdown }, 'interrupted', 'interrupted'],
    ['a record the store refused after spawn', { exitCode: null, signal: 'SIGKILL', stop: STOPS.unrecorded }, 'failed', 'storage_unavailable'],
    ['a stop wins over a runtime failure', { runtimeError: { code: 'process_lost', message: 'x' }, stop: STOPS.cancel }, 'cancelled', undefined],
  ])('%s', (_name, input, status, code) => {
    const outcome = judgeOutcome({ ...base, ...input });
    expect(outcome.status).toBe(status);
    expect(outcome.error?.code).toBe(code);
    if (outcome.error) expect(outcome.error.message.length).toBeGreaterThan(0);
  });

  it('messages say what happened', () => {
    expect(judgeOutcome({ ...base, stop: timedOut(2500) }).error?.message).toContain('2500 ms');
    expect(judgeOutcome({ ...base, exitCode: 7 }).error?.message).toContain('code 7');
    expect(judgeOutcome({ ...base, exitCode: null, signal: 'SIGSEGV' }).error?.message).toContain('SIGSEGV');
    expect(judgeOutcome({ ...base, agentError: 'quota exceeded' }).error?.message).toBe('quota exceeded');
    expect(judgeOutcome({ ...base, stop: STOPS.unrecorded }).error?.message).not.toMatch(/service stopped/i);
  });
});
