import { describe, expect, it } from 'vitest';
import { RUN_STATUSES, type RunStatus, hasEnded } from '../../src/contract/records';
import { type Change, INTERRUPTED, TRANSITIONS, type TransitionName, can, change } from '../../src/core/runs/transitions';
import type { StoredRun } from '../../src/core/types';
import { storedRun } from '../helpers/records';

const OWNER = 'inst_owner';
const OTHER = 'inst_other';
const AT = new Date('2026-01-01T00:01:00.000Z');

/** What an ended run owes. */
const PENDING = { target: 0, event: 'run.ended', at: AT.toISOString(), state: 'pending', attempts: 0, nextAttemptAt: AT.getTime() } as const;

function run(status: RunStatus, more: Partial<StoredRun> = {}): StoredRun {
  return storedRun('run_1', {
    status,
    createdAt: '2026-01-01T00:00:00.000Z',
    bootId: OWNER,
    webhookTargets: [{ url: 'https://example.test/hook', events: ['run.ended', 'agent.session'], source: 'start' }],
    ...(status === 'queued' ? { queued: { prompt: 'p', resumes: false, apiUrl: 'http://127.0.0.1', expiresAt: '2026-01-01T01:00:00.000Z' } } : {}),
    ...(hasEnded(status) ? { deliveries: [PENDING], deliveryDueAt: PENDING.nextAttemptAt } : {}),
    ...more,
  });
}

/** Each transition of a stored record as the lifecycle applies it, asked by `by`. */
const APPLY: Record<Exclude<TransitionName, 'accept' | 'enqueue'>, (by: string) => Change> = {
  take: (by) => change.take(by, AT),
  endQueued: (by) => change.endQueued('cancelled', by, AT),
  recordProcess: (by) => change.recordProcess(by, { process: { pid: 1, machine: 'm' }, placement: { cwd: '/w' } }),
  noteSession: (by) => change.noteSession(by, 'agent-session', AT.toISOString()),
  noteApprovals: (by) => change.noteApprovals(by, { asked: 1, allowed: 0, denied: 0, timedOut: 0, pending: ['apr_1'] }),
  noteTurn: (by) => change.noteTurn(by, { verify: { verdict: 'pending', attempts: [] } }),
  finish: (by) => change.finish(by, { status: 'succeeded', exitCode: 0, signal: null, lastMessage: 'done' }, AT),
  claim: (by) => change.claim(by, OTHER),
  interrupt: (by) => change.interrupt(by, OTHER, AT),
  claimEnded: (by) => change.claimEnded(by, OTHER),
  settleDelivery: (by) => change.settleDelivery(by, { ...PENDING, state: 'delivered', attempts: 1, nextAttemptAt: null }),
};

const cases = Object.keys(APPLY).flatMap((name) => RUN_STATUSES.map((status) => [name as keyof typeof APPLY, status] as const));

describe('the run state machine', () => {
  it.each(cases)('%s from %s: allowed exactly where the table says, to a status the table names', (name, status) => {
    const declared = TRANSITIONS[name];
    const allowed = (declared.from as readonly RunStatus[]).includes(status);
    const next = APPLY[name](OWNER)(run(status));
    expect(next !== undefined).toBe(allowed);
    expect(can(name, run(status), OWNER)).toBe(allowed);
    if (next) expect(declared.to as readonly RunStatus[]).toContain(next.status);
  });

  it.each(Object.keys(APPLY).filter((n) => TRANSITIONS[n as keyof typeof APPLY].owned) as Array<keyof typeof APPLY>)(
    '%s is refused to any instance but its owner',
    (name) => {
      for (const status of TRANSITIONS[name].from as readonly RunStatus[]) {
        expect(APPLY[name](OTHER)(run(status))).toBeUndefined();
        expect(APPLY[name](OWNER)(run(status))).toBeDefined();
      }
    },
  );

  it('every final status is reached by some transition, and none leaves one', () => {
    const reached = new Set(Object.values(TRANSITIONS).flatMap((t) => t.to as readonly RunStatus[]));
    for (const status of RUN_STATUSES) expect(reached.has(status)).toBe(true);
    for (const [name, apply] of Object.entries(APPLY))
      for (const status of RUN_STATUSES.filter(hasEnded)) {
        const next = apply(OWNER)(run(status));
        if (next) expect({ name, status: next.status }).toEqual({ name, status });
      }
  });

  it('each ending computes the final fields once, the same way, and owes run.ended in the same record', () => {
    const finished = APPLY.finish(OWNER)(run('running'));
    const interrupted = APPLY.interrupt(OWNER)(run('running'));
    const cancelled = APPLY.endQueued(OWNER)(run('queued'));
    for (const final of [finished, interrupted, cancelled]) {
      expect(final).toMatchObject({ endedAt: AT.toISOString(), durationMs: 60_000 });
      expect(final?.deliveries).toEqual([expect.objectContaining({ event: 'run.ended', state: 'pending', at: AT.toISOString() })]);
      expect(final?.deliveryDueAt).toBe(AT.getTime());
      expect(final?.queued).toBeUndefined();
    }
    expect(finished).toMatchObject({ status: 'succeeded', exitCode: 0, lastMessage: 'done', bootId: OWNER });
    expect(interrupted).toMatchObject({ status: 'interrupted', error: INTERRUPTED, bootId: OTHER });
    expect(cancelled).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' }, bootId: OWNER });
  });

  it('take moves a queued run to its new owner and drops the prompt; claim changes only the owner', () => {
    const taken = APPLY.take(OTHER)(run('queued'));
    expect(taken).toMatchObject({ status: 'running', bootId: OTHER, startedAt: AT.toISOString() });
    expect(taken?.queued).toBeUndefined();
    expect(APPLY.claim(OWNER)(run('running'))).toEqual({ ...run('running'), bootId: OTHER });
  });

  it('claimEnded changes only the owner of an ended run; settleDelivery only its delivery and due time', () => {
    expect(APPLY.claimEnded(OWNER)(run('succeeded'))).toEqual({ ...run('succeeded'), bootId: OTHER });
    const settled = APPLY.settleDelivery(OWNER)(run('failed'));
    const { deliveryDueAt: _due, ...rest } = run('failed');
    expect(settled).toEqual({ ...rest, deliveries: [{ ...PENDING, state: 'delivered', attempts: 1, nextAttemptAt: null }] });
  });

  it("noting the agent's session owes agent.session, once", () => {
    const noted = APPLY.noteSession(OWNER)(run('running'));
    expect(noted?.agentSessionId).toBe('agent-session');
    expect(noted?.deliveries?.map((d) => d.event)).toEqual(['agent.session']);
    expect(APPLY.noteSession(OWNER)(noted as StoredRun)?.deliveries).toHaveLength(1);
  });
});
