import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { type Faults, faultyKeyv, kindOf, refusingFirst } from '../helpers/faulty-store';
import { faultySqlite } from '../helpers/faulty-sql-store';
import type { HeadlessStore } from '../../src/core/store/headless-store';
import type { Keyv } from 'keyv';
import { type Receiver, closeReceivers, startReceiver } from '../helpers/receiver';
import { eventually, waitFor } from '../helpers/wait';

/**
 * The fault-injection tier, in process: every write one start makes (its Session, idempotency
 * key, record, process, agent session and outbox, output, timeline, final record, delivery
 * attempts, an Inbox push) is refused in turn, once (a full disk for a moment) or with every
 * write after it (the service dies right there). After a restart on what was stored, the
 * docs/reliability.md's promises must hold: an acknowledged run is found, ends, is listed once under its
 * status, its timeline and its webhooks say what its record says, and its idempotency key
 * answers with it. It runs over a Keyv (the key-value entries a host's store holds) and over the
 * service's own SQLite store (its tables with real columns, the daemon's), each write refused
 * before it reaches the store.
 */

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const GATES = mkdtempSync(join(tmpdir(), 'hrw-gates-'));
/** The agent prints its session, then waits for its gate: opened once its agent.session webhook is recorded delivered (or given up on). */
const promptOf = (gate: string) => `session abc; wait-file ${gate}; echo done`;

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver(() => 200);
});
const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(async () => {
  await closeReceivers();
  for (const dir of [GATES, ...dirs]) rmSync(dir, { recursive: true, force: true });
});

/** A store whose writes can be refused, opened again on what it kept (a restart). */
interface FaultyStore {
  state: Faults;
  open(): Keyv | Promise<HeadlessStore>;
}

/** The stores this tier refuses writes of. */
const STORES: Array<[string, () => FaultyStore]> = [
  [
    'a Keyv',
    () => {
      const keyv = faultyKeyv();
      return { state: keyv.state, open: keyv.keyv };
    },
  ],
  [
    'SQLite',
    () => {
      const sqlite = faultySqlite();
      dirs.push(sqlite.dir);
      return { state: sqlite.state, open: sqlite.store };
    },
  ],
];

const hostOn = async (store: FaultyStore) =>
  createTestHost({ store: await store.open(), webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true, retryDelaysMs: [50, 50, 50] } });

interface Outcome {
  start: number;
  prompt: string;
  taskId?: string;
  push: number;
  path: string;
}

let runs = 0;
/** One start (idempotent, with webhooks for both events) and one Inbox push; waits for the run to end where it can. */
async function workload(host: TestHost, settle = false): Promise<Outcome> {
  const path = `/hook-${++runs}`;
  const gate = join(GATES, `gate-${runs}`);
  const prompt = promptOf(gate);
  const body = { prompt, agent: 'fake', webhook: { url: `${receiver.url}${path}`, events: ['run.ended', 'agent.session'] } };
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: body, headers: { 'idempotency-key': path } });
  const taskId = res.status === 202 ? ((await res.json()) as { taskId: string }).taskId : undefined;
  const push = (await host.request('POST', '/api/workspaces/ws/inbox', { json: { title: path } })).status;
  if (taskId) {
    // The run goes on only once its agent.session delivery is recorded, so the writes a start makes come in one order however busy the machine.
    const sessionDelivered = async () =>
      ((await json(await host.request('GET', `/api/headless/${taskId}`))).webhooks as Array<{ event: string; state: string }> | undefined)?.some(
        (w) => w.event === 'agent.session' && w.state === 'delivered',
      ) === true;
    if (settle) await waitFor(sessionDelivered, { what: 'the agent.session delivery to be recorded' });
    else await eventually(sessionDelivered, { timeoutMs: 3000 });
  }
  writeFileSync(gate, '');
  if (taskId) {
    await eventually(async () => ((await (await host.request('GET', `/api/headless/${taskId}`)).json()) as { status: string }).status !== 'running', {
      timeoutMs: 3000,
    });
    await eventually(() => deliveries(path).some((d) => d.type === 'run.ended'), { timeoutMs: 1000 });
    // Every write it makes, the delivery results included, however slow the machine.
    if (settle) {
      const delivered = async () =>
        ((await json(await host.request('GET', `/api/headless/${taskId}`))).webhooks as Array<{ state: string }>).every((w) => w.state === 'delivered');
      await waitFor(delivered, { timeoutMs: 240_000, what: 'every delivery to be recorded' });
    }
  }
  return { start: res.status, prompt, push, path, ...(taskId ? { taskId } : {}) };
}

const deliveries = (path: string) =>
  receiver.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body) as { type: string; data: { status?: string; resumeId: string } });

const json = async (res: Response) => (await res.json()) as Record<string, any>;

/** The promises, checked on a new service over what the old one stored. */
async function checkAfterRestart(host: TestHost, first: Outcome): Promise<void> {
  // A start answered 202 is durable; one refused answered a problem (never a crash).
  expect([202, 503]).toContain(first.start);
  expect([201, 503]).toContain(first.push);
  const body = { prompt: first.prompt, agent: 'fake', webhook: { url: `${receiver.url}${first.path}`, events: ['run.ended', 'agent.session'] } };
  const retry = await host.request('POST', '/api/workspaces/ws/headless', { json: body, headers: { 'idempotency-key': first.path } });
  // Never 409 for a key whose run does not exist: the retry runs it, or is answered by the run it made.
  expect(retry.status).toBe(202);
  const retried = await json(retry);
  if (first.taskId) expect(retried.taskId).toBe(first.taskId);
  const taskId = retried.taskId as string;
  const record = await host.waitEnded(taskId, 30_000);
  expect(record.status).not.toBe('running');
  const list = async (query: string) =>
    ((await json(await host.request('GET', `/api/headless?wsId=ws&limit=100${query}`))).runs as Array<{ taskId: string }>).map((r) => r.taskId);
  expect((await list('')).filter((id) => id === taskId)).toHaveLength(1);
  expect(await list(`&status=${record.status}`)).toContain(taskId);
  expect(await list('&status=running')).not.toContain(taskId);
  // Its timeline ends with what its record says.
  const events = (await json(await host.request('GET', `/api/headless/${taskId}/events?format=json&limit=1000`))).events as Array<{
    type: string;
    data: { status?: string };
  }>;
  expect(events.at(-1)).toMatchObject({ type: 'run.ended', data: { status: record.status } });
  // Its run.ended webhook arrives, saying what its record says; none ever said otherwise.
  await waitFor(() => deliveries(first.path).some((d) => d.type === 'run.ended'), { timeoutMs: 240_000, what: `the run.ended webhook of ${taskId}` });
  for (const d of deliveries(first.path).filter((x) => x.type === 'run.ended')) expect(d.data.status).toBe(record.status);
  // An agent.session webhook is only ever sent for a Session that can be resumed.
  if (deliveries(first.path).some((d) => d.type === 'agent.session')) {
    expect(await json(await host.request('GET', `/api/sessions/${record.resumeId}`))).toMatchObject({ resumable: true });
  }
  if (first.push === 201) {
    const items = (await json(await host.request('GET', '/api/workspaces/ws/inbox?limit=100'))).items as Array<{ title: string }>;
    expect(items.filter((i) => i.title === first.path)).toHaveLength(1);
  }
}

/** Every kind of write the workload makes. */
const KINDS = [
  'idem pending',
  'session',
  'run running',
  'workspace',
  'run running +process',
  'idem done',
  'inbox',
  'run running +process owes agent.session',
  'run running +process owes agent.session after agent.session:delivered',
  'run succeeded +process owes agent.session+run.ended after agent.session:delivered',
  'output',
  'events segment',
  'events head',
  'run succeeded +process owes agent.session+run.ended after agent.session:delivered,run.ended:delivered',
];

describe.each(STORES)('over %s', (_, faulty) => {
  describe('refused writes: the kinds of write a start makes', () => {
    it('are the ones this tier refuses (a new kind of write must join it)', async () => {
      const store = faulty();
      const host = await hostOn(store);
      await workload(host, true);
      await host.close();
      expect([...new Set(store.state.writes.map(kindOf))].sort()).toEqual([...KINDS].sort());
    });
  });

  describe.each([
    ['once', false],
    ['and every write after it (a crash there)', true],
  ])('each write refused %s', (_, crash) => {
    it.each(KINDS)('%s', async (kind) => {
      const store = faulty();
      store.state.refuse = refusingFirst((w) => kindOf(w) === kind, crash);
      const first = await hostOn(store);
      const outcome = await workload(first);
      // The refused write may be the last one the workload makes (a delivery's result): wait for it,
      // however slow the machine, before the service is closed under it.
      await waitFor(async () => store.state.refused.length > 0, { timeoutMs: 240_000, what: `a write of kind "${kind}"` });
      await first.close();
      expect(store.state.refused.length).toBeGreaterThan(0);
      store.state.refuse = undefined;
      const again = await hostOn(store);
      await checkAfterRestart(again, outcome);
    });
  });
});
