import { describe, expect, it } from 'vitest';
import { AgentRegistry } from '../../src/core/agents/registry';
import type { HttpProblem } from '../../src/contract/problems';
import { Admission, type AdmissionDecision } from '../../src/core/runs/admission';
import { createFleet } from '../../src/core/fleet/index';
import { SessionBook } from '../../src/core/sessions';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { keyvStore } from '../../src/core/store/keyv-store';
import type { SessionState, Workspace } from '../../src/core/types';
import { fakeAgent } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const ws: Workspace = { id: 'ws', path: '/tmp', agents: ['fake', 'other'] };
const request = (ask: { agent?: string; resumeId?: string } = {}) => ask;

async function setup(maxConcurrentRuns = 2) {
  const store = keyvStore(createMemoryKeyv());
  const registry = new AgentRegistry({ fake: fakeAgent, other: fakeAgent });
  const sessions = new SessionBook(
    store,
    createFleet(store, { log: () => undefined }),
    () => true,
    () => undefined,
  );
  const admission = new Admission({ registry, sessions, store, maxConcurrentRuns, baseEnv: process.env, log: () => undefined });
  const session = async (extra: Partial<SessionState> = {}) => {
    const s: SessionState = {
      resumeId: `ses_${Math.random().toString(36).slice(2)}`,
      workspaceId: 'ws',
      agent: 'fake',
      agentSessionId: 'abc',
      retired: false,
      createdAt: '',
      lastRunAt: '',
      runCount: 1,
      ...extra,
    };
    await sessions.create(s);
    return s;
  };
  return { admission, sessions, session };
}

/** The reservation of an admitted run; a decision to wait is thrown as its problem. */
const reserved = async (p: Promise<AdmissionDecision>) => {
  const decision = await p;
  if ('wait' in decision) throw decision.problem;
  return decision.admitted;
};

const code = async (p: Promise<AdmissionDecision>) => {
  try {
    await reserved(p);
  } catch (e) {
    return (e as HttpProblem).code;
  }
  return 'admitted';
};

describe('admission', () => {
  it('checks and reserves in one tick: of many simultaneous starts exactly the capacity is admitted', async () => {
    const { admission } = await setup(3);
    const results = await Promise.all(Array.from({ length: 20 }, () => code(admission.admit(ws, request({ agent: 'fake' })))));
    expect(results.filter((r) => r === 'admitted')).toHaveLength(3);
    expect(results.filter((r) => r === 'capacity_reached')).toHaveLength(17);
    expect(admission.running).toBe(3);
  });

  it('of simultaneous resumes of one Session exactly one is admitted; release frees it, once', async () => {
    const { admission, sessions, session } = await setup(10);
    const s = await session();
    const attempts = Array.from({ length: 8 }, () => reserved(admission.admit(ws, request({ resumeId: s.resumeId }))).catch((e: HttpProblem) => e.code));
    const results = await Promise.all(attempts);
    const won = results.filter((r) => typeof r !== 'string');
    expect(won).toHaveLength(1);
    expect(results.filter((r) => r === 'session_busy')).toHaveLength(7);
    const status = async () => (await sessions.view(await sessions.require(s.resumeId))).status;
    expect(await status()).toBe('busy');
    const reservation = won[0] as Exclude<(typeof won)[0], string>;
    await reservation.release();
    await reservation.release();
    expect(await status()).toBe('idle');
    expect(admission.running).toBe(0);
  });

  it('a refused start holds nothing', async () => {
    const { admission, session } = await setup(1);
    const retired = await session({ retired: true });
    const elsewhere = await session({ workspaceId: 'other' });
    const unresumable = await session({ agentSessionId: undefined });
    expect(await code(admission.admit(ws, request({ agent: 'nope' })))).toBe('agent_unknown');
    expect(await code(admission.admit(ws, request({ resumeId: 'ses_missing' })))).toBe('session_not_found');
    expect(await code(admission.admit(ws, request({ resumeId: retired.resumeId })))).toBe('session_retired');
    expect(await code(admission.admit(ws, request({ resumeId: elsewhere.resumeId })))).toBe('session_other_workspace');
    expect(await code(admission.admit(ws, request({ resumeId: unresumable.resumeId })))).toBe('session_not_resumable');
    expect(await code(admission.admit(ws, request({ resumeId: retired.resumeId, agent: 'other' })))).toBe('session_retired');
    expect(admission.running).toBe(0);
    expect(await code(admission.admit(ws, request({ agent: 'fake' })))).toBe('admitted');
  });

  it('a resume names the Session agent or none', async () => {
    const { admission, session } = await setup();
    const s = await session();
    expect(await code(admission.admit(ws, request({ resumeId: s.resumeId, agent: 'other' })))).toBe('session_not_resumable');
    const reservation = await reserved(admission.admit(ws, request({ resumeId: s.resumeId })));
    expect(reservation.adapter.name).toBe('fake');
    expect(reservation.resumeId).toBe(s.resumeId);
    expect(reservation.taskId).toMatch(/^run_/);
  });

  it('after close every start is refused with shutting_down', async () => {
    const { admission } = await setup();
    admission.close();
    expect(await code(admission.admit(ws, request({ agent: 'fake' })))).toBe('shutting_down');
  });

  it('the most recent agent is chosen when none is named, and survives a reload', async () => {
    const store = keyvStore(createMemoryKeyv());
    const registry = new AgentRegistry({ fake: fakeAgent, other: fakeAgent });
    const make = () =>
      new Admission({
        registry,
        sessions: new SessionBook(
          store,
          createFleet(store, { log: () => undefined }),
          () => true,
          () => undefined,
        ),
        store,
        maxConcurrentRuns: 4,
        baseEnv: process.env,
        log: () => undefined,
      });
    const first = make();
    first.rememberAgent('ws', 'other');
    expect((await reserved(first.admit(ws, request()))).adapter.name).toBe('other');
    // Remembered in the background: the next instance reads it once it is stored.
    await waitFor(async () => (await store.get('workspace:ws')) !== undefined, { what: 'the most recent agent stored' });
    const second = make();
    await second.loadLastAgents();
    expect((await reserved(second.admit(ws, request()))).adapter.name).toBe('other');
  });
});

describe('the Session claim and the capacity slot', () => {
  it('are held apart: freeing the slot lets another run in while the Session stays busy', async () => {
    const { admission, session } = await setup(1);
    const s = await session();
    const first = await reserved(admission.admit(ws, request({ agent: 'fake', resumeId: s.resumeId })));
    expect(await code(admission.admit(ws, request({ agent: 'fake' })))).toBe('capacity_reached');
    await first.slot.release();
    expect(admission.running).toBe(0);
    expect(await code(admission.admit(ws, request({ agent: 'fake', resumeId: s.resumeId })))).toBe('session_busy');
    const other = await reserved(admission.admit(ws, request({ agent: 'fake' })));
    await first.claim.release();
    await other.release();
    expect(await code(admission.admit(ws, request({ agent: 'fake', resumeId: s.resumeId })))).toBe('admitted');
  });
});
