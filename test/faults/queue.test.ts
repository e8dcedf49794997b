import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { type Write, faultyKeyv, kindOf, refusingFirst } from '../helpers/faulty-store';
import { type Receiver, closeReceivers, startReceiver } from '../helpers/receiver';
import { eventually, waitFor } from '../helpers/wait';

/**
 * The fault-injection tier over the queue: each write of a queue transition (accepted `queued`,
 * taken to `running`, cancelled while queued) is refused in turn, once (a full disk for a moment)
 * or with every write after it (the service dies there). After a restart on what was stored, an
 * accepted run is found, ends exactly once, is listed once under its status, and its timeline and
 * webhook say what its record says; a refused start or cancel was answered 503, never lost.
 */

const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
let receiver: Receiver;
const dirs: string[] = [];
beforeAll(async () => {
  receiver = await startReceiver(() => 200);
});
afterEach(closeAllHosts);
afterAll(async () => {
  await closeReceivers();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const json = async (res: Response) => (await res.json()) as Record<string, any>;
const hostOn = (store: ReturnType<typeof faultyKeyv>) =>
  createTestHost({
    store: store.keyv(),
    maxConcurrentRuns: 1,
    queue: {},
    webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true, retryDelaysMs: [50, 50, 50] },
  });
const deliveries = (path: string) =>
  receiver.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body) as { type: string; data: { status: string } });

let n = 0;
/** A held run in the one slot, then a queued one; then its slot is freed, or it is cancelled. */
async function workload(host: TestHost, mode: 'run' | 'cancel') {
  const gate = join(mkdtempSync(join(tmpdir(), 'hrw-qfault-')), 'go');
  dirs.push(join(gate, '..'));
  const path = `/queued-${++n}`;
  const body = { prompt: 'echo queued', agent: 'fake', webhook: { url: `${receiver.url}${path}` } };
  await host.start(`wait-file ${gate}; echo held`);
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: body, headers: { 'idempotency-key': path } });
  const taskId = res.status === 202 ? ((await json(res)).taskId as string) : undefined;
  const cancel = taskId && mode === 'cancel' ? (await host.request('POST', `/api/headless/${taskId}/cancel`)).status : undefined;
  writeFileSync(gate, '');
  if (taskId)
    await eventually(async () => !['queued', 'running'].includes((await json(await host.request('GET', `/api/headless/${taskId}`))).status), {
      timeoutMs: 3000,
    });
  return { start: res.status, cancel, taskId, path, body };
}

async function checkAfterRestart(host: TestHost, first: Awaited<ReturnType<typeof workload>>): Promise<void> {
  expect([202, 503]).toContain(first.start);
  if (first.cancel !== undefined) expect([202, 503]).toContain(first.cancel);
  const retry = await host.request('POST', '/api/workspaces/ws/headless', { json: first.body, headers: { 'idempotency-key': first.path } });
  expect(retry.status).toBe(202);
  const taskId = (await json(retry)).taskId as string;
  if (first.taskId) expect(taskId).toBe(first.taskId);
  const record = await host.waitEnded(taskId, 30_000);
  // Cancelled if the cancel was answered 202; else it ran (here or before the restart), or was interrupted there.
  if (first.cancel === 202) expect(record.status).toBe('cancelled');
  else expect(['succeeded', 'interrupted']).toContain(record.status);
  const list = async (query: string) =>
    ((await json(await host.request('GET', `/api/headless?wsId=ws&limit=100${query}`))).runs as Array<{ taskId: string }>).map((r) => r.taskId);
  expect((await list('')).filter((id) => id === taskId)).toHaveLength(1);
  expect(await list(`&status=${record.status}`)).toContain(taskId);
  expect(await list('&status=queued')).not.toContain(taskId);
  const events = (await json(await host.request('GET', `/api/headless/${taskId}/events?format=json`))).events as Array<{
    type: string;
    data: { status?: string };
  }>;
  expect(events.at(-1)).toMatchObject({ type: 'run.ended', data: { status: record.status } });
  await waitFor(() => deliveries(first.path).some((d) => d.type === 'run.ended'), { timeoutMs: 240_000, what: `the run.ended webhook of ${taskId}` });
  for (const d of deliveries(first.path)) expect(d.data.status).toBe(record.status);
}

/** The queue's writes by kind; the take is the `running` write of a run that was queued (it has `startedAt`). */
const KIND: Record<string, (w: Write) => boolean> = {
  'run queued': (w) => kindOf(w) === 'run queued',
  'run running (taken)': (w) => kindOf(w) === 'run running' && w.value?.startedAt !== undefined,
  'run cancelled owes run.ended': (w) => kindOf(w) === 'run cancelled owes run.ended',
};

const CASES: Array<[string, 'run' | 'cancel']> = [
  ['run queued', 'run'],
  ['run running (taken)', 'run'],
  ['run queued', 'cancel'],
  ['run cancelled owes run.ended', 'cancel'],
];

describe('the queue’s writes', () => {
  it.each(['run', 'cancel'] as const)('a %s workload makes the writes this tier refuses', async (mode) => {
    const store = faultyKeyv();
    const host = await hostOn(store);
    await workload(host, mode);
    await host.close();
    for (const [kind, m] of CASES) if (m === mode) expect(store.state.writes.some(KIND[kind]!), kind).toBe(true);
  });
});

describe.each([
  ['once', false],
  ['and every write after it (a crash there)', true],
])('each queue write refused %s', (_, crash) => {
  it.each(CASES)('%s (%s)', async (kind, mode) => {
    const store = faultyKeyv();
    store.state.refuse = refusingFirst(KIND[kind]!, crash);
    const first = await hostOn(store);
    const outcome = await workload(first, mode);
    await waitFor(async () => store.state.refused.length > 0, { timeoutMs: 240_000, what: `a write of kind "${kind}"` });
    await first.close();
    store.state.refuse = undefined;
    await checkAfterRestart(await hostOn(store), outcome);
  });
});
