import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { noneMarked } from '../helpers/processes';
import { type Received, closeReceivers, startReceiver } from '../helpers/receiver';
import { sleep, waitFor } from '../helpers/wait';

/**
 * The seeded crash test: the built daemon under load (starts, idempotent starts, webhooks to a
 * receiver that refuses every first attempt, Inbox pushes from agents and callers) is killed with
 * SIGKILL at random moments, ROUNDS times, and restarted each time. Then every promise of the
 * docs/reliability.md is checked against what was acknowledged. HEADLESS_CRASH_ROUNDS
 * and HEADLESS_CRASH_SEED run it longer or otherwise.
 */

const ROUNDS = Number(process.env.HEADLESS_CRASH_ROUNDS ?? 10);
const SEED = Number(process.env.HEADLESS_CRASH_SEED ?? 20261123);
const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

/** mulberry32: small, seeded, good enough to pick moments and prompts. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const dirs: string[] = [];
afterAll(async () => {
  cleanupDaemons(dirs);
  await closeReceivers();
});

interface Acknowledged {
  taskId: string;
  key?: string;
  body: Record<string, unknown>;
}

const PROMPTS = ['echo hi', 'session s1; sleep 150; echo done', 'sleep 300; exit 1', 'session s2; push report; echo pushed', 'sleep 2000'];

/** Sends starts and pushes until `stop` says so; records what the daemon acknowledged. */
async function load(d: Daemon, rnd: () => number, round: number, acked: Acknowledged[], keys: Map<string, Record<string, unknown>>, stop: () => boolean) {
  for (let i = 0; !stop() && i < 200; i++) {
    const body = { prompt: PROMPTS[Math.floor(rnd() * PROMPTS.length)]!, agent: 'fake' };
    const key = rnd() < 0.5 ? `k-${round}-${i}` : undefined;
    if (key) keys.set(key, body);
    try {
      const res = await api(d, 'POST', '/api/workspaces/ws/headless', body, key ? { 'idempotency-key': key } : {});
      if (res.status === 202) acked.push({ taskId: ((await res.json()) as { taskId: string }).taskId, body, ...(key ? { key } : {}) });
      else await res.body?.cancel();
      if (rnd() < 0.3) await (await api(d, 'POST', '/api/workspaces/ws/inbox', { title: `caller ${round}-${i}` })).body?.cancel();
    } catch {
      return; // killed
    }
    await sleep(Math.floor(rnd() * 40));
  }
}

describe('seeded crash test', () => {
  it(`${ROUNDS} kill -9s under load, then every acknowledged run ends, once, as its webhooks and timeline say`, {
    timeout: 60_000 + ROUNDS * 15_000,
  }, async () => {
    const rnd = random(SEED);
    // Every first attempt of a delivery is refused (half the traffic fails); a retry is taken.
    const seen = new Set<string>();
    const receiver = await startReceiver((_, r) => {
      const id = r.headers['webhook-id']!;
      if (seen.has(id)) return 200;
      seen.add(id);
      return 500;
    });
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      webhooks: { allowPrivateTargets: true, retryDelaysMs: [100, 200, 300, 400, 500, 600] },
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'], webhook: { url: receiver.url, events: ['run.ended', 'agent.session'] } }],
    });
    const env = { HEADLESS_WEBHOOK_SECRET: SECRET };
    const acked: Acknowledged[] = [];
    const keys = new Map<string, Record<string, unknown>>();
    for (let round = 0; round < ROUNDS; round++) {
      const d = await startDaemon(dir, ['--port', '0'], env);
      let killed = false;
      const before = acked.length;
      const loading = load(d, rnd, round, acked, keys, () => killed);
      // The kill comes at a random moment after the daemon has acknowledged work, however slow the machine.
      await waitFor(() => acked.length >= before + 2, { timeoutMs: 120_000, intervalMs: 20, what: 'two acknowledged starts this round' });
      await sleep(Math.floor(rnd() * 700));
      killed = true;
      expect(await d.stop('SIGKILL')).toBeNull();
      await loading;
    }
    expect(acked.length).toBeGreaterThan(ROUNDS);

    const d = await startDaemon(dir, ['--port', '0'], env);
    const read = async (taskId: string) => (await (await api(d, 'GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
    const records = new Map<string, Record<string, any>>();
    await waitFor(
      async () => {
        for (const { taskId } of acked)
          if (!records.has(taskId)) {
            const r = await read(taskId);
            if (r.status !== 'running' && r.status !== 'queued') records.set(taskId, r);
          }
        return records.size === acked.length;
      },
      { timeoutMs: 240_000, intervalMs: 200, what: 'every acknowledged run to end' },
    );
    // Listed once each, under its status; none left running.
    const listed: string[] = [];
    let cursor = '';
    for (let i = 0; i < 100; i++) {
      const page = (await (await api(d, 'GET', `/api/headless?wsId=ws&limit=500${cursor}`)).json()) as {
        runs: Array<{ taskId: string }>;
        nextCursor: string | null;
      };
      listed.push(...page.runs.map((r) => r.taskId));
      if (page.nextCursor === null) break;
      cursor = `&cursor=${page.nextCursor}`;
    }
    for (const { taskId } of acked) expect(listed.filter((id) => id === taskId)).toHaveLength(1);
    expect(((await (await api(d, 'GET', '/api/headless?wsId=ws&status=running')).json()) as { runs: unknown[] }).runs).toEqual([]);
    // Each timeline ends with its record's status.
    for (const [taskId, record] of records) {
      const events = (
        (await (await api(d, 'GET', `/api/headless/${taskId}/events?format=json&limit=1000`)).json()) as { events: Array<{ type: string; data: any }> }
      ).events;
      expect(events.at(-1), taskId).toMatchObject({ type: 'run.ended', data: { status: record.status } });
    }
    // Each run's run.ended webhook was taken at least once, and none ever said another status.
    const ended = (r: Received) => JSON.parse(r.body) as { type: string; data: { taskId: string; status: string } };
    const taken = (taskId: string) => {
      const ids = receiver.received.filter((r) => ended(r).type === 'run.ended' && ended(r).data.taskId === taskId).map((r) => r.headers['webhook-id']);
      // Refused the first time, so taken once it came again.
      return ids.length >= 2;
    };
    await waitFor(() => [...records.keys()].every(taken), { timeoutMs: 240_000, intervalMs: 200, what: 'every run.ended webhook to be taken' });
    for (const r of receiver.received.map(ended).filter((e) => e.type === 'run.ended')) {
      if (records.has(r.data.taskId)) expect(r.data.status, r.data.taskId).toBe(records.get(r.data.taskId)!.status);
    }
    // No idempotency key answers 409 without a run: a retry of each is answered by its run, or runs.
    for (const [key, body] of keys) {
      const res = await api(d, 'POST', '/api/workspaces/ws/headless', body, { 'idempotency-key': key });
      const first = acked.find((a) => a.key === key);
      // A key whose start was never answered runs now (or meets a full house), never 409.
      expect(res.status, key).toBe(first ? 202 : res.status === 429 ? 429 : 202);
      if (first) expect(((await res.json()) as { taskId: string }).taskId).toBe(first.taskId);
      else await res.body?.cancel();
    }
    // No agent process of any round is left.
    expect(await noneMarked(acked.map((a) => a.taskId))).toBe(true);
    await d.stop();
  });
});

describe('a full queue across a kill -9', () => {
  it('every queued run survives, starts once after the restart, in the order it was accepted', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const gate = join(dir, 'go');
    writeConfig(dir, { maxConcurrentRuns: 1, queue: { max: 20 } });
    const d = await startDaemon(dir, ['--port', '0']);
    const start = async (prompt: string) => api(d, 'POST', '/api/workspaces/ws/headless', { prompt, agent: 'fake' });
    expect((await start(`wait-file ${gate}; echo held`)).status).toBe(202);
    const queued: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await start(`echo queued ${i}`);
      expect(res.status).toBe(202);
      const body = (await res.json()) as { taskId: string; status: string; queuePosition: number };
      expect(body).toMatchObject({ status: 'queued', queuePosition: i + 1 });
      queued.push(body.taskId);
    }
    expect((await start('echo one too many')).status).toBe(429);
    expect(await d.stop('SIGKILL')).toBeNull();

    writeFileSync(gate, '');
    const again = await startDaemon(dir, ['--port', '0']);
    const records: Array<Record<string, any>> = [];
    for (const taskId of queued) {
      await waitFor(
        async () => !['queued', 'running'].includes(((await (await api(again, 'GET', `/api/headless/${taskId}`)).json()) as { status: string }).status),
        {
          timeoutMs: 240_000,
          intervalMs: 100,
          what: `${taskId} to end`,
        },
      );
      records.push((await (await api(again, 'GET', `/api/headless/${taskId}`)).json()) as Record<string, any>);
    }
    expect(records.map((r) => r.status)).toEqual(queued.map(() => 'succeeded'));
    const starts = records.map((r) => r.startedAt as string);
    expect([...starts].sort()).toEqual(starts);
    const listed = ((await (await api(again, 'GET', '/api/headless?wsId=ws&limit=100')).json()) as { runs: Array<{ taskId: string }> }).runs.map(
      (r) => r.taskId,
    );
    for (const taskId of queued) expect(listed.filter((id) => id === taskId)).toHaveLength(1);
    await again.stop();
  });
});
