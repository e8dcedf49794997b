import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandlers, FleetRequest } from '../../src/core/fleet/fleet';
import { createFleet } from '../../src/core/fleet/index';
import { SessionBook } from '../../src/core/sessions';
import { type HeadlessStore, keyvStore } from '../../src/core/store/keyv-store';
import { RUN_TABLE } from '../../src/core/runs/records';
import type { StoredRun } from '../../src/core/types';
import { createMemoryKeyv, createPostgresKeyv } from '../../src/core/store/keyvs';
import { FAKE_AGENT, type TestHost, closeAllHosts, createTestHost, fakeAgent } from '../helpers/harness';
import { noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';
import { sha256 } from '../../src/core/util/ids';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';

/** The fleet's PostgreSQL parts in one process: each instance its own store, one database. */

let postgres: TestPostgres;
const stores: HeadlessStore[] = [];
beforeAll(async () => {
  postgres = await startPostgres();
}, 600_000);
afterAll(async () => {
  await closeAllHosts();
  await Promise.all(stores.map((s) => s.close()));
  await postgres?.stop();
});

/** Handlers of a member that does nothing when asked or told. */
const IDLE: FleetHandlers = {
  takeOver: async () => undefined,
  answer: async () => ({ ok: true }),
  lost: () => undefined,
  reconnected: () => undefined,
  changed: () => undefined,
};

async function instance(url: string) {
  const store = keyvStore(await createPostgresKeyv(url));
  stores.push(store);
  const fleet = createFleet(store, { log: () => undefined });
  await fleet.join(IDLE);
  return { store, fleet };
}

/** The one suite every Fleet passes: alone (memory, SQLite) and on PostgreSQL. */
describe.each(['alone', 'postgres'] as const)('Fleet conformance: %s', (kind) => {
  async function make() {
    if (kind === 'postgres') return (await instance(await postgres.database())).fleet;
    const fleet = createFleet(keyvStore(createMemoryKeyv()), { log: () => undefined });
    await fleet.join(IDLE);
    return fleet;
  }

  it('join takes over at once: every owner but itself is gone', async () => {
    const store = kind === 'postgres' ? keyvStore(await createPostgresKeyv(await postgres.database())) : keyvStore(createMemoryKeyv());
    if (kind === 'postgres') stores.push(store);
    const fleet = createFleet(store, { log: () => undefined });
    expect(fleet.shared).toBe(kind === 'postgres');
    const seen: Array<[string | undefined, boolean]> = [];
    await fleet.join({
      async takeOver(isGone) {
        for (const owner of [fleet.instanceId, undefined, 'boot_gone']) seen.push([owner, await isGone(owner)]);
      },
      answer: async () => ({ ok: true }),
      lost: () => undefined,
      reconnected: () => undefined,
      changed: () => undefined,
    });
    expect(seen).toEqual([
      [fleet.instanceId, false],
      [undefined, true],
      ['boot_gone', true],
    ]);
    await fleet.leave();
  });

  it('a claim has one holder until that holder releases it', async () => {
    const fleet = await make();
    expect(await fleet.claim('k', 'h1')).toBeUndefined();
    expect(await fleet.claim('k', 'h2')).toBe('h1');
    await fleet.release('k', 'h2');
    expect(await fleet.holder('k')).toBe('h1');
    await fleet.release('k', 'h1');
    expect(await fleet.holder('k')).toBeUndefined();
    expect(await fleet.claim('k', 'h2')).toBeUndefined();
    await fleet.leave();
  });

  it('exclusive work answers what the work returns, and a failure passes through and frees the key', async () => {
    const fleet = await make();
    expect(await fleet.exclusive('x', async () => 42)).toBe(42);
    await expect(fleet.exclusive('x', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await fleet.exclusive('x', async () => 'again')).toBe('again');
    await fleet.leave();
  });
});

describe('a fleet on PostgreSQL', () => {
  it('claims: of many takers on several instances one holds a key, until it releases it', async () => {
    const url = await postgres.database();
    const instances = await Promise.all([instance(url), instance(url), instance(url)]);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => instances[i % 3]!.fleet.claim('busy:s1', `run_${i}`)));
    const winners = answers.map((holder, i) => (holder === undefined ? `run_${i}` : undefined)).filter(Boolean);
    expect(winners).toHaveLength(1);
    expect(new Set(answers.filter(Boolean))).toEqual(new Set(winners));
    await instances[2]!.fleet.release('busy:s1', 'run_other');
    expect(await instances[1]!.fleet.holder('busy:s1')).toBe(winners[0]);
    await instances[0]!.fleet.release('busy:s1', winners[0]!);
    expect(await instances[1]!.fleet.holder('busy:s1')).toBeUndefined();
    await Promise.all(instances.map((i) => i.fleet.leave()));
  });

  it('Session updates from several instances never lose each other', async () => {
    const url = await postgres.database();
    const [a, b] = await Promise.all([instance(url), instance(url)]);
    const book = (i: typeof a) =>
      new SessionBook(
        i.store,
        i.fleet,
        () => true,
        () => undefined,
      );
    const [onA, onB] = [book(a), book(b)];
    const now = new Date().toISOString();
    await onA.create({ resumeId: 'ses_1', workspaceId: 'ws', agent: 'fake', retired: false, createdAt: now, lastRunAt: now, runCount: 0 });
    await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => (i % 2 ? onA : onB).update('ses_1', (s) => ({ runCount: s.runCount + 1 }))),
      onB.retire('ses_1'),
      onA.noteAgentSessionId('ses_1', 'agent-1'),
    ]);
    // No cache between instances: each reads what the other wrote.
    expect(await onA.get('ses_1')).toMatchObject({ runCount: 20, retired: true, agentSessionId: 'agent-1' });
    expect(await onB.get('ses_1')).toMatchObject({ runCount: 20, retired: true, agentSessionId: 'agent-1' });
    await Promise.all([a.fleet.leave(), b.fleet.leave()]);
  });

  it('an instance whose lease ran out has its runs taken over, and stops them itself once it notices', async () => {
    const url = await postgres.database();
    // A lease long enough that a busy machine never lets a live instance's run out by itself: only the forced expiry below does.
    const a = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const b = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const { taskId } = await a.start('sleep 30000');
    // A's lease (the older instance id) is made to run out, as if A had been paused for longer than it.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    await db.query("UPDATE headless_instances SET expires_at = now() - interval '1 second' WHERE id = (SELECT min(id) FROM headless_instances)");
    await db.end();
    expect(await b.waitEnded(taskId, 240_000)).toMatchObject({ status: 'interrupted' });
    // A notices at its next renewal and stops the run it no longer owns.
    expect(await a.waitEnded(taskId, 240_000)).toMatchObject({ status: 'interrupted' });
    expect(await noneMarked([taskId])).toBe(true);
    // A carries on under a renewed lease: a new run on it is not taken over.
    const next = await a.start('echo still here');
    expect(await b.waitEnded(next.taskId, 240_000)).toMatchObject({ status: 'succeeded' });
  });

  it('an owner cut off while another instance takes its run over never records what it saw of the kill: the run ends interrupted', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 30_000 });
    const { taskId } = await a.start('sleep 30000');
    // What a sweeper does first, as the loaded fault test caught it in the middle: it claims the
    // run (its owner is now the sweeper), then kills what is left of it.
    const store = keyvStore(await createPostgresKeyv(url));
    stores.push(store);
    const runs = store.table(RUN_TABLE);
    await runs.load();
    const claimed: Record<string, any> = { ...(await runs.get(taskId))!, bootId: 'boot_sweeper' };
    await runs.put(taskId, claimed as StoredRun);
    process.kill(claimed.process.pid, 'SIGKILL');
    await waitFor(() => noneMarked([taskId]), { what: 'the agent to be gone' });
    // A saw its agent killed by no stop of its own; it must not write that as the run's end.
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 250));
      expect((await runs.get(taskId))?.status).toBe('running');
    }
    await runs.put(taskId, {
      ...(claimed as StoredRun),
      status: 'interrupted',
      endedAt: new Date().toISOString(),
      durationMs: 1,
      error: { code: 'interrupted', message: 'x' },
    });
    // A's waiters and followers get the end the sweeper recorded.
    expect(await a.waitEnded(taskId, 60_000)).toMatchObject({ status: 'interrupted' });
  });

  /**
   * Instances A and B on one database, and a run on A whose agent asks a question that waits a
   * day (only an answer can end it within a test), listed on B. `body` gets the question's id.
   */
  async function questionOnA(url: string, body: (hosts: { a: TestHost; b: TestHost; taskId: string; id: string }) => Promise<void>) {
    const ws = mkdtempSync(join(tmpdir(), 'hrw-fleet-ask-'));
    const env = { PATH: `${join(__dirname, '../fixtures/bin')}:${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' };
    const asking = { id: 'ws', path: ws, agents: ['gemini-acp'], run: { permissions: 'ask' as const, approvals: { timeoutMs: 86_400_000 } }, env };
    try {
      const a = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [asking], instanceLeaseMs: 10_000 });
      const b = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [asking], instanceLeaseMs: 10_000 });
      const res = await a.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini-acp', prompt: 'WRITE_FILE fleet.txt' } });
      const { taskId } = (await res.json()) as { taskId: string };
      let id = '';
      await waitFor(async () => {
        const list = (await (await b.request('GET', '/api/approvals')).json()) as { approvals: Array<{ id: string; taskId: string }> };
        id = list.approvals.find((q) => q.taskId === taskId)?.id ?? '';
        return id !== '';
      });
      await body({ a, b, taskId, id });
    } finally {
      rmSync(ws, { recursive: true, force: true });
    }
  }

  /** Cuts the listening connection of the instance that joined first: it reconnects at its next renewal (a third of its lease). */
  async function cutFirstListener(url: string) {
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const cut = await db.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'headless-run-webhook ' || (SELECT min(id) FROM headless_instances)",
    );
    expect(cut.rowCount).toBe(1);
    await db.end();
  }

  it('a question answered on another instance reaches its run at once (docs/approvals.md); answered twice across instances, one answer counts', async () => {
    await questionOnA(await postgres.database(), async ({ a, b, taskId, id }) => {
      const [first, second] = await Promise.all([
        b.request('POST', `/api/approvals/${id}`, { json: { decision: 'allow' } }),
        a.request('POST', `/api/approvals/${id}`, { json: { decision: 'deny' } }),
      ]);
      expect([first.status, second.status].sort()).toEqual([200, 409]);
      const counted = first.status === 200 ? 'allowed' : 'denied';
      expect(await a.waitEnded(taskId)).toMatchObject({ status: 'succeeded', approvals: { [counted]: 1 } });
      expect(await (await b.request('GET', `/api/approvals/${id}`)).json()).toMatchObject({ status: counted, answer: { by: 'caller' } });
    });
  });

  it('a cancel its owner does not hear is 503 run_owner_unreachable; once it listens again, the cancel works', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const b = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const { taskId } = await a.start('sleep 30000');
    await cutFirstListener(url);
    const unheard = await b.request('POST', `/api/headless/${taskId}/cancel`);
    expect(unheard.status).toBe(503);
    expect(unheard.headers.get('retry-after')).toBe('5');
    expect(await unheard.json()).toMatchObject({ code: 'run_owner_unreachable' });
    expect(await (await a.request('GET', `/api/headless/${taskId}`)).json()).toMatchObject({ status: 'running' });
    // Once A listens again (however long a busy machine takes to renew), the cancel is heard.
    await waitFor(async () => (await b.request('POST', `/api/headless/${taskId}/cancel`)).status === 202, { intervalMs: 500, what: 'A to hear the cancel' });
    expect(await b.waitEnded(taskId)).toMatchObject({ status: 'cancelled' });
  });

  it('a cancel its asker gave up on (its 503) is never carried out by an owner that hears it late; one not given up on is', async () => {
    const url = await postgres.database();
    const asker = await instance(url);
    const store = keyvStore(await createPostgresKeyv(url));
    stores.push(store);
    const owner = createFleet(store, { log: () => undefined });
    const acted: string[] = [];
    const answer = async (request: FleetRequest) => {
      if (request.op === 'cancel') acted.push(request.taskId);
      return { ok: true as const };
    };
    await owner.join({ takeOver: async () => undefined, answer, lost: () => undefined, reconnected: () => undefined, changed: () => undefined });
    // Two requests arrive late, as after a pause: the first its asker gave up on (its claim says so, as its 503 left it).
    const [given, kept] = [randomUUID(), randomUUID()];
    expect(await asker.fleet.claim(`fleet-ask:${given}`, 'withdrawn')).toBeUndefined();
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    for (const [id, taskId] of [
      [given, 'run_given_up'],
      [kept, 'run_late'],
    ])
      await db.query('SELECT pg_notify($1, $2)', [owner.instanceId, JSON.stringify({ id, from: asker.fleet.instanceId, request: { op: 'cancel', taskId } })]);
    await db.end();
    await waitFor(() => acted.includes('run_late'), { what: 'the late request not given up on to be acted on' });
    expect(await asker.fleet.ask(owner.instanceId, { op: 'cancel', taskId: 'run_fresh' })).toEqual({ ok: true });
    expect(acted).toEqual(['run_late', 'run_fresh']);
    await owner.leave();
  });

  it('a follow-up sent to another instance reaches the run at its next turn, its text through the store (past what a notification holds)', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const b = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 10_000 });
    const gate = join(a.dir, 'follow-up-gate');
    const { taskId } = await a.start(`session fleet-follow; wait-file ${gate}`);
    // The fake agent's next turn runs what it is told: here, to print 9000 x's.
    const long = `echo ${'x'.repeat(9000)}`;
    const sent = await b.request('POST', `/api/headless/${taskId}/messages`, { json: { text: long } });
    expect(sent.status).toBe(202);
    expect(await sent.json()).toMatchObject({ taskId, messageId: expect.stringMatching(/^msg_/) });
    writeFileSync(gate, '');
    expect(await a.waitEnded(taskId)).toMatchObject({ status: 'succeeded' });
    // The ended run's output is stored beside its record, not with it: read from the other instance once it is there.
    const stdout = async () => ((await (await b.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;
    await waitFor(async () => (await stdout()) !== '', { what: 'the output to be stored' });
    expect(await stdout()).toContain('x'.repeat(9000));
  });

  it('a question answered while its instance does not listen reaches its run once it listens again, not at its timeout', async () => {
    const url = await postgres.database();
    await questionOnA(url, async ({ a, b, taskId, id }) => {
      // B's telling is lost: A reads what it waits on again once it listens.
      await cutFirstListener(url);
      expect((await b.request('POST', `/api/approvals/${id}`, { json: { decision: 'allow' } })).status).toBe(200);
      expect(await a.waitEnded(taskId)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1 } });
    });
  });

  it('the most recent agent of a workspace is the same on every instance', async () => {
    const url = await postgres.database();
    const options = { agents: { fake: fakeAgent, other: fakeAgent }, workspaces: [{ id: 'ws', path: tmpdir(), agents: ['fake', 'other'] }] };
    const a = await createTestHost({ ...options, store: await createPostgresKeyv(url) });
    const b = await createTestHost({ ...options, store: await createPostgresKeyv(url) });
    const first = await a.start('echo x', { agent: 'other' });
    await a.waitEnded(first.taskId);
    const res = await b.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo y' } });
    expect(await res.json()).toMatchObject({ status: 'running' });
    const list = (await (await b.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ agent: string }> };
    expect(list.runs.map((r) => r.agent)).toEqual(['other', 'other']);
  });

  it('a closed instance leaves the fleet at once, so no one waits for its lease', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url) });
    const b = await createTestHost({ store: await createPostgresKeyv(url) });
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const count = async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM headless_instances')).rows[0]!.n);
    expect(await count()).toBe(2);
    await a.close();
    expect(await count()).toBe(1);
    await b.close();
    expect(await count()).toBe(0);
    await db.end();
  });

  it('a delivery whose key a dead member still holds is never answered "handled" without a run: the resend waits, then runs once the claim is gone', async () => {
    const url = await postgres.database();
    const secret = 'a-fleet-bearer-token';
    const trigger = {
      name: 'alerts',
      workspace: 'ws',
      sender: 'generic',
      verify: { method: 'bearer' },
      run: { agent: 'fake' },
      secret,
      prompt: 'echo handled',
    } as const;
    const host = await createTestHost({ store: await createPostgresKeyv(url), triggers: [{ ...trigger, dedupe: { key: '{{ payload.id }}' } }] });
    // The member that took the first copy died holding the key's claim: its owner is no living instance. (A rendered value is marked ⟦…⟧.)
    const key = `idem:${sha256(`trigger:alerts\0trigger:alerts:${sha256('⟦evt-1⟧')}`)}`;
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    await db.query("INSERT INTO headless_claims (key, holder, owner) VALUES ($1, $2, 'boot_dead')", [key, sha256('{"trigger":"alerts"}')]);
    await db.end();
    const resend = () =>
      host.request('POST', '/api/triggers/alerts', {
        body: JSON.stringify({ id: 'evt-1' }),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
      });
    // A sender retries a 503 (Retry-After) and stops at a 2xx: every 2xx must name a run.
    let answer = await resend();
    for (let tries = 0; answer.status === 503 && tries < 10; tries++) {
      expect(answer.headers.get('retry-after')).toBe('15');
      answer = await resend();
    }
    const body = (await answer.json()) as { outcome: string; taskId?: string };
    expect(answer.status).toBe(202);
    expect(body).toMatchObject({ outcome: 'started', taskId: expect.stringMatching(/^run_/) });
    expect(await host.waitEnded(body.taskId as string)).toMatchObject({ status: 'succeeded' });
  });

  it('the queue across three instances: runs queued on one are taken by the others, each exactly once, also after the one that accepted them is gone', async () => {
    const url = await postgres.database();
    const gates = mkdtempSync(join(tmpdir(), 'hrw-fleetq-'));
    const hosts = [];
    for (const name of ['a', 'b', 'c']) {
      const host = await createTestHost({ store: await createPostgresKeyv(url), maxConcurrentRuns: 1, queue: {} });
      await host.start(`wait-file ${join(gates, name)}; echo held`);
      hosts.push(host);
    }
    const [a, b, c] = hosts as [TestHost, TestHost, TestHost];
    const queued: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await a.request('POST', '/api/workspaces/ws/headless', { json: { prompt: `echo q${i}`, agent: 'fake' } });
      const body = (await res.json()) as { taskId: string; status: string };
      expect(body.status).toBe('queued');
      queued.push(body.taskId);
    }
    await a.close();
    writeFileSync(join(gates, 'b'), '');
    writeFileSync(join(gates, 'c'), '');
    const ended = [];
    for (const taskId of queued) ended.push(await b.waitEnded(taskId, 60_000));
    expect(ended.map((r) => r.status)).toEqual(queued.map(() => 'succeeded'));
    // Each queued run spawned exactly once, on b or c: one held run each, and the twelve.
    expect(b.spawner.count + c.spawner.count).toBe(2 + 12);
    rmSync(gates, { recursive: true, force: true });
  });

  it('a schedule in a fleet: each occurrence fires exactly once, while instances start and stop around it', async () => {
    const url = await postgres.database();
    const schedules = [{ name: 'tick', cron: '* * * * * *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'echo tick' }];
    const member = async () => createTestHost({ store: await createPostgresKeyv(url), schedules });
    const runs = async (host: TestHost) =>
      ((await (await host.request('GET', '/api/headless?wsId=ws&schedule=tick&limit=100')).json()) as { runs: Array<{ scheduledFor: string }> }).runs;
    const a = await member();
    const b = await member();
    await waitFor(async () => (await runs(a)).length >= 2, { timeoutMs: 240_000, what: 'two firings' });
    const c = await member();
    await waitFor(async () => (await runs(c)).length >= 4, { timeoutMs: 240_000, what: 'four firings' });
    await a.close();
    await waitFor(async () => (await runs(b)).length >= 6, { timeoutMs: 240_000, what: 'six firings' });
    await b.close();
    await c.close();
    const reader = await createTestHost({ store: await createPostgresKeyv(url) });
    const fired = (await runs(reader)).map((r) => r.scheduledFor);
    expect(fired.length).toBeGreaterThanOrEqual(6);
    expect(new Set(fired).size).toBe(fired.length);
  });

  it('placement: a start on a member without the workspace is queued and runs on a member with it; a workspace no member runs is 404 at once', async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-place-'));
    const api = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [{ id: 'other', path: dir, agents: ['fake'] }] });
    const runner = await createTestHost({ store: await createPostgresKeyv(url) });
    const res = await api.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo placed', agent: 'fake' } });
    expect(res.status).toBe(202);
    const { taskId, status } = (await res.json()) as { taskId: string; status: string };
    expect(status).toBe('queued');
    expect(await api.waitEnded(taskId, 60_000)).toMatchObject({ status: 'succeeded', workspaceId: 'ws' });
    expect([api.spawner.count, runner.spawner.count]).toEqual([0, 1]);
    // What the member advertised is enough to refuse a start at once, as it would.
    const loosened = await api.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'not-enabled' } });
    expect(loosened.status).toBe(400);
    const nowhere = await api.request('POST', '/api/workspaces/nowhere/headless', { json: { prompt: 'x', agent: 'fake' } });
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toMatchObject({
      code: 'workspace_not_found',
      detail: 'No workspace "nowhere" on this instance, and no member of the fleet runs one.',
    });
    // A member that leaves takes its workspaces with it.
    await runner.close();
    expect((await api.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'fake' } })).status).toBe(404);
    rmSync(dir, { recursive: true, force: true });
    // Each member holds a few connections: close them, so the server's limit is never reached.
    await closeAllHosts();
  });

  it('a start that names no agent is given one installed where the workspace runs, not where the start arrived', async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-installed-'));
    // `solo` is on the runner's PATH only; both know its definition.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'solo'), `#!/bin/sh\nexec "${process.execPath}" "${FAKE_AGENT}" "$@"\n`, { mode: 0o755 });
    const agents = { fake: fakeAgent, solo: { command: 'solo', args: ['{prompt}'] } };
    const api = await createTestHost({ store: await createPostgresKeyv(url), agents, workspaces: [{ id: 'other', path: dir, agents: ['fake'] }] });
    const runner = await createTestHost({
      store: await createPostgresKeyv(url),
      agents,
      workspaces: [{ id: 'ws', path: dir, agents: ['solo'] }],
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
    const res = await api.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo chosen there' } });
    expect(res.status).toBe(202);
    const { taskId } = (await res.json()) as { taskId: string };
    expect(await api.waitEnded(taskId, 60_000)).toMatchObject({ status: 'succeeded', agent: 'solo', agentChosenBy: 'first' });
    expect([api.spawner.count, runner.spawner.count]).toEqual([0, 1]);
    rmSync(dir, { recursive: true, force: true });
    await closeAllHosts();
  });

  it('labels: a workspace that asks for "gpu" runs only on a member with that label; the others accept and queue its starts', async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-labels-'));
    const gpuWorkspace = [{ id: 'ws', path: dir, agents: ['fake'], labels: ['gpu'] }];
    const plain = await createTestHost({ store: await createPostgresKeyv(url), workspaces: gpuWorkspace });
    const gpu = await createTestHost({ store: await createPostgresKeyv(url), workspaces: gpuWorkspace, labels: ['gpu', 'linux'] });
    const taskIds: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await plain.request('POST', '/api/workspaces/ws/headless', { json: { prompt: `echo gpu${i}`, agent: 'fake' } });
      const body = (await res.json()) as { taskId: string; status: string };
      expect(body.status).toBe('queued');
      taskIds.push(body.taskId);
    }
    for (const taskId of taskIds) expect(await plain.waitEnded(taskId, 60_000)).toMatchObject({ status: 'succeeded' });
    expect([plain.spawner.count, gpu.spawner.count]).toEqual([0, 4]);
    rmSync(dir, { recursive: true, force: true });
    await closeAllHosts();
  });

  it('a member that has the workspace without its labels accepts starts by the definition of the member that runs it: its defaults, and its webhook added where it runs (never advertised)', async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-theirs-'));
    const mine = [{ id: 'ws', path: dir, agents: ['fake'], labels: ['gpu'] }];
    const hook = 'http://127.0.0.1:9/hook?token=secret-in-the-url';
    const theirs = [{ id: 'ws', path: dir, agents: ['fake'], labels: ['gpu'], run: { timeoutMs: 30_000 }, webhook: { url: hook } }];
    const plain = await createTestHost({ store: await createPostgresKeyv(url), workspaces: mine });
    const gpu = await createTestHost({
      store: await createPostgresKeyv(url),
      workspaces: theirs,
      labels: ['gpu'],
      webhooks: { allowPrivateTargets: true, secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}` },
    });
    const res = await plain.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo theirs', agent: 'fake' } });
    expect(res.status).toBe(202);
    const { taskId } = (await res.json()) as { taskId: string };
    expect(await plain.waitEnded(taskId, 60_000)).toMatchObject({ status: 'succeeded', timeoutMs: 30_000 });
    const record = (await (await plain.request('GET', `/api/headless/${taskId}`)).json()) as { webhooks?: Array<{ url: string }> };
    expect(record.webhooks?.map((w) => w.url)).toEqual([hook]);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const advertised = JSON.stringify((await db.query('SELECT definition FROM headless_served')).rows);
    await db.end();
    expect(advertised).not.toContain('secret-in-the-url');
    expect(gpu.spawner.count).toBe(1);
    // With no member left that has the labels, its runs are still read here; only a start is refused.
    await gpu.close();
    const listed = (await (await plain.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string }> };
    expect(listed.runs.map((r) => r.taskId)).toEqual([taskId]);
    const refused = await plain.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } });
    expect([refused.status, ((await refused.json()) as { code: string }).code]).toEqual([404, 'workspace_not_found']);
    rmSync(dir, { recursive: true, force: true });
    // Each member holds a few connections: close them, so the server's limit is never reached.
    await closeAllHosts();
  });

  it('alone, a workspace that asks for labels this instance lacks is refused at start-up: nothing else could run it', async () => {
    await expect(createTestHost({ workspaces: [{ id: 'ws', path: tmpdir(), labels: ['gpu'] }] })).rejects.toThrow(
      'workspace "ws" asks for labels ["gpu"] this instance does not have (labels: [])',
    );
    await expect(createTestHost({ labels: ['gpu', 'gpu'] })).rejects.toThrow('labels lists "gpu" twice');
    await expect(createTestHost({ workspaces: [] })).rejects.toThrow('workspaces is empty: alone (no fleet to queue its starts for) nothing could run');
    await expect(createTestHost({ labels: ['no spaces'] })).rejects.toThrow('labels[0] must match');
  });

  it('1000 queued runs across two members, each with its own workspace: none lost, none run twice, each workspace in the order queued', async () => {
    const url = await postgres.database();
    const dirs = [mkdtempSync(join(tmpdir(), 'hrw-many-a-')), mkdtempSync(join(tmpdir(), 'hrw-many-b-'))];
    const only = (id: string, dir: string) => [{ id, path: dir, agents: ['fake'] }];
    const api = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [{ id: 'front', path: dirs[0] as string }], queue: { max: 1000 } });
    const one = await createTestHost({ store: await createPostgresKeyv(url), workspaces: only('wa', dirs[0] as string), maxConcurrentRuns: 1 });
    const two = await createTestHost({ store: await createPostgresKeyv(url), workspaces: only('wb', dirs[1] as string), maxConcurrentRuns: 1 });
    const queued: Record<string, string[]> = { wa: [], wb: [] };
    for (let i = 0; i < 1000; i++) {
      const ws = i % 2 === 0 ? 'wa' : 'wb';
      const res = await api.request('POST', `/api/workspaces/${ws}/headless`, { json: { prompt: `echo n${i}`, agent: 'fake' } });
      expect(res.status).toBe(202);
      queued[ws]?.push(((await res.json()) as { taskId: string }).taskId);
    }
    for (const [ws, ids] of Object.entries(queued)) {
      const ended = [];
      for (const taskId of ids) ended.push(await api.waitEnded(taskId, 120_000));
      expect(ended.map((r) => r.status)).toEqual(ids.map(() => 'succeeded'));
      // One slot per member: each started only once the one before it had ended, in the order queued.
      const starts = ended.map((r) => Date.parse(r.startedAt as string));
      expect(
        [...starts].sort((x, y) => x - y),
        ws,
      ).toEqual(starts);
    }
    expect([api.spawner.count, one.spawner.count, two.spawner.count]).toEqual([0, 500, 500]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    // Each member holds a few connections: close them, so the server's limit is never reached.
    await closeAllHosts();
  });

  it("the member that runs a run holds it to its own policy for the workspace: one accepted under another member's looser definition ends failed policy_loosened", async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-held-'));
    const gate = join(dir, 'gate');
    const strict = { id: 'ws', path: dir, agents: ['fake'], labels: ['gpu'], run: { stallTimeoutMs: 60_000 } };
    const runner = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [strict], labels: ['gpu'] });
    // A member defining it looser, newer (so its definition is the one advertised to starts), its one slot held.
    const looser = await createTestHost({
      store: await createPostgresKeyv(url),
      workspaces: [{ ...strict, run: {} }],
      labels: ['gpu'],
      maxConcurrentRuns: 1,
    });
    const held = await looser.start(`wait-file ${gate}; echo held`);
    const front = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [{ id: 'other', path: dir, agents: ['fake'] }] });
    const loose = await front.start('echo uncapped');
    expect(await front.waitEnded(loose.taskId, 60_000)).toMatchObject({
      status: 'failed',
      error: { code: 'policy_loosened', message: expect.stringContaining('Field "stallTimeoutMs" cannot be loosened on the member that runs it') },
    });
    const capped = await front.start('echo capped', { stallTimeoutMs: 30_000 });
    expect(await front.waitEnded(capped.taskId, 60_000)).toMatchObject({ status: 'succeeded' });
    expect([front.spawner.count, runner.spawner.count]).toEqual([0, 1]);
    writeFileSync(gate, '');
    expect(await looser.waitEnded(held.taskId, 60_000)).toMatchObject({ status: 'succeeded' });
    rmSync(dir, { recursive: true, force: true });
    // Each member holds a few connections: close them, so the server's limit is never reached.
    await closeAllHosts();
  });

  it('a queued run left without its job (its instance died between the two writes) is placed by the sweeper once that instance is gone', async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-orphan-'));
    const gate = join(dir, 'gate');
    const front = await createTestHost({ store: await createPostgresKeyv(url), workspaces: [{ id: 'other', path: dir, agents: ['fake'] }] });
    const runner = await createTestHost({ store: await createPostgresKeyv(url), maxConcurrentRuns: 1, instanceLeaseMs: 3000 });
    const held = await runner.start(`wait-file ${gate}; echo held`);
    const { taskId } = await front.start('echo orphan');
    // As if `front` had died before sending the job: its job is gone, its record stays queued.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const dropped = await client.query("DELETE FROM pgboss.job WHERE data->>'taskId' = $1", [taskId]);
    await client.end();
    expect(dropped.rowCount).toBe(1);
    await front.close();
    writeFileSync(gate, '');
    expect(await runner.waitEnded(held.taskId, 60_000)).toMatchObject({ status: 'succeeded' });
    expect(await runner.waitEnded(taskId, 120_000)).toMatchObject({ status: 'succeeded' });
    rmSync(dir, { recursive: true, force: true });
    await closeAllHosts();
  });

  it('reads from memory a fleet can trust: an ended record is kept while its member hears every change; an announced change drops it, a cut listener stops every such read', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url) });
    const b = await createTestHost({ store: await createPostgresKeyv(url) });
    const { taskId } = await a.start('echo kept', { title: 'first' });
    await a.waitEnded(taskId, 60_000);
    const title = async () => ((await (await b.request('GET', `/api/headless/${taskId}`)).json()) as { title?: string }).title;
    const db = new pg.Client({ connectionString: url });
    db.on('error', () => undefined);
    await db.connect();
    try {
      const retitle = (to: string) =>
        db.query("UPDATE headless_run SET record = jsonb_set(record::jsonb, '{title}', to_jsonb($2::text))::text WHERE id = $1", [taskId, to]);
      /** A change made as every write is: the database announces it. */
      const announced = async (to: string) => {
        await retitle(to);
        await expect.poll(title).toBe(to);
      };
      /** A change made without the announcement (its trigger off), as no writer of the service can. */
      const unannounced = async (to: string) => {
        await db.query('ALTER TABLE headless_run DISABLE TRIGGER headless_run_changed');
        await retitle(to);
        await db.query('ALTER TABLE headless_run ENABLE TRIGGER headless_run_changed');
      };
      /**
       * Whether b answers `value` from memory: after it read it, a change it was not told about is
       * not seen. A read while a change was being heard is not kept, so b is given a few tries
       * (each from an announced `value`), never a wait.
       */
      const keeps = async (value: string) => {
        for (let attempt = 0; attempt < 20; attempt++) {
          await announced(value);
          await title();
          await unannounced(`${value}, unannounced`);
          if ((await title()) === value) return true;
        }
        return false;
      };
      expect(await keeps('first')).toBe(true);
      // An announced change: b drops what it kept, and reads it at once.
      await retitle('second');
      await expect.poll(title).toBe('second');
      // Kept again, then b's listening connection is cut: it reads the database until it listens again.
      expect(await keeps('third')).toBe(true);
      await db.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'headless-run-webhook ' || (SELECT max(id) FROM headless_instances)",
      );
      await expect.poll(title).toBe('third, unannounced');
    } finally {
      await db.end();
    }
    await closeAllHosts();
  });

  it('a listening connection that stalls (its server process stopped) is dropped: the member keeps its lease and its run, and stops reading what it kept', async () => {
    const url = await postgres.database();
    const a = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 3000 });
    const b = await createTestHost({ store: await createPostgresKeyv(url), instanceLeaseMs: 3000 });
    const ended = await b.start('echo kept', { title: 'kept' });
    await b.waitEnded(ended.taskId, 60_000);
    const running = await b.start('sleep 60000');
    const title = async () => ((await (await b.request('GET', `/api/headless/${ended.taskId}`)).json()) as { title?: string }).title;
    const db = new pg.Client({ connectionString: url });
    db.on('error', () => undefined);
    await db.connect();
    const listeners = async () =>
      (
        await db.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'headless-run-webhook ' || (SELECT max(id) FROM headless_instances) ORDER BY backend_start",
        )
      ).rows.map((r) => r.pid);
    const [stalled] = await listeners();
    expect(stalled).toBeDefined();
    try {
      await expect.poll(title).toBe('kept');
      await title();
      process.kill(stalled as number, 'SIGSTOP');
      await db.query('ALTER TABLE headless_run DISABLE TRIGGER headless_run_changed');
      await db.query("UPDATE headless_run SET record = jsonb_set(record::jsonb, '{title}', to_jsonb($2::text))::text WHERE id = $1", [ended.taskId, 'changed']);
      await db.query('ALTER TABLE headless_run ENABLE TRIGGER headless_run_changed');
      // The stalled listener is dropped and another opened; meanwhile nothing kept is read.
      await expect.poll(title).toBe('changed');
      await expect.poll(async () => (await listeners()).length).toBe(2);
      // Its renewals never waited on it: its run is still its own, running.
      expect(((await (await a.request('GET', `/api/headless/${running.taskId}`)).json()) as { status: string }).status).toBe('running');
      expect((await b.request('GET', '/readyz')).status).toBe(200);
    } finally {
      process.kill(stalled as number, 'SIGCONT');
      await db.end();
    }
    await closeAllHosts();
  });

  it('what members advertise is input: a row that is not a usable definition of the workspace asked for is not used (404), never a crash or a 500', async () => {
    const url = await postgres.database();
    const api = await createTestHost({ store: await createPostgresKeyv(url) });
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const hostile: Array<[string, string]> = [
      ['h1', JSON.stringify({ id: 'other', installed: [] })],
      ['h2', '42'],
      ['h3', JSON.stringify({ id: 'h3', installed: [], run: { permissions: 'yolo' } })],
      ['h4', JSON.stringify({ id: 'h4', installed: [], queue: { max: -1 } })],
      ['h5', JSON.stringify('notjson{')],
      ['h6', JSON.stringify({ id: 'h6' })],
    ];
    for (const [id, definition] of hostile)
      await db.query('INSERT INTO headless_served (workspace_id, instance_id, definition) SELECT $1, max(id), $2::jsonb FROM headless_instances', [
        id,
        definition,
      ]);
    await db.end();
    for (const [id] of hostile) {
      const res = await api.request('POST', `/api/workspaces/${id}/headless`, { json: { prompt: 'echo x', agent: 'fake' } });
      expect([id, res.status, ((await res.json()) as { code: string }).code]).toEqual([id, 404, 'workspace_not_found']);
    }
    await closeAllHosts();
  });

  it("daily limits are exact across the fleet: of 12 simultaneous starts on two members, exactly the day's 5 are accepted", async () => {
    const url = await postgres.database();
    const dir = mkdtempSync(join(tmpdir(), 'hrw-daily-'));
    const limited = [{ id: 'ws', path: dir, agents: ['fake'], limits: { runsPerDay: 5 } }];
    const members = [
      await createTestHost({ store: await createPostgresKeyv(url), workspaces: limited, maxConcurrentRuns: 8 }),
      await createTestHost({ store: await createPostgresKeyv(url), workspaces: limited, maxConcurrentRuns: 8 }),
    ];
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        (members[i % 2] as TestHost).request('POST', '/api/workspaces/ws/headless', { json: { prompt: `echo d${i}`, agent: 'fake' } }),
      ),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(5).fill(202), ...Array(7).fill(429)]);
    for (const refused of answers.filter((r) => r.status === 429)) expect(await refused.json()).toMatchObject({ code: 'daily_limit_reached' });
    rmSync(dir, { recursive: true, force: true });
    await closeAllHosts();
  });
});
