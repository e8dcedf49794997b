import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createSqliteKeyv } from '../../src/core/index';
import { type TestHost, closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/**
 * The queue (docs/queue-and-schedules.md): runs are held open with `wait-file`, so which run
 * holds a slot never depends on the machine's speed.
 */

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'hrw-queue-'));
  dirs.push(d);
  return d;
}

type Json = Record<string, any>;
const read = async (host: TestHost, taskId: string): Promise<Json> => (await (await host.request('GET', `/api/headless/${taskId}`)).json()) as Json;
const start = (host: TestHost, body: Json) => host.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', ...body } });
const events = async (host: TestHost, taskId: string): Promise<string[]> =>
  ((await (await host.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string }> }).events.map((e) => e.type);

/** A prompt that holds its slot until `file` exists. */
const held = (file: string) => `wait-file ${file}; echo done`;

describe('without a queue', () => {
  it('a start at capacity is refused, as the spec says: 429 capacity_reached', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ maxConcurrentRuns: 1 });
    await host.start(held(gate));
    expect((await problem(await start(host, { prompt: 'echo x' }))).code).toBe('capacity_reached');
    writeFileSync(gate, '');
  });
});

describe('with a queue', () => {
  it('at capacity a start is queued with its place; beyond the queue, 429 queue_full; they start in order as slots free', async () => {
    const gates = scratch();
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: { max: 2 } });
    const first = await host.start(held(join(gates, 'a')));
    const b = await start(host, { prompt: held(join(gates, 'b')), title: 'second' });
    expect(b.status).toBe(202);
    const second = (await b.json()) as Json;
    expect(second).toMatchObject({ status: 'queued', queuePosition: 1 });
    const third = (await (await start(host, { prompt: 'echo third' })).json()) as Json;
    expect(third).toMatchObject({ status: 'queued', queuePosition: 2 });
    const full = await start(host, { prompt: 'echo fourth' });
    expect(await problem(full)).toMatchObject({ status: 429, code: 'queue_full' });
    expect(full.headers.get('retry-after')).toBe('5');
    expect(await read(host, second.taskId)).toMatchObject({ status: 'queued', queuePosition: 1, title: 'second', endedAt: null });
    const list = (await (await host.request('GET', '/api/headless?wsId=ws&status=queued')).json()) as { runs: Json[] };
    expect(list.runs.map((r) => [r.taskId, r.queuePosition])).toEqual([
      [third.taskId, 2],
      [second.taskId, 1],
    ]);
    expect(host.spawner.count).toBe(1);
    expect(await (await host.request('GET', '/metrics')).text()).toMatch(/^headless_runs_queued 2$/m);

    writeFileSync(join(gates, 'a'), '');
    await waitFor(async () => (await read(host, second.taskId)).status === 'running', { timeoutMs: 240_000, what: 'the second run to start' });
    expect(await read(host, third.taskId)).toMatchObject({ status: 'queued', queuePosition: 1 });
    writeFileSync(join(gates, 'b'), '');
    const ended = [await host.waitEnded(first.taskId), await host.waitEnded(second.taskId, 30_000), await host.waitEnded(third.taskId, 30_000)];
    expect(ended.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(Date.parse(ended[1]!.startedAt as string)).toBeLessThanOrEqual(Date.parse(ended[2]!.startedAt as string));
    expect(ended[1]).not.toHaveProperty('queuePosition');
    expect(await events(host, second.taskId)).toEqual(['run.queued', 'run.started', 'run.ended']);
  });

  it('cancel while queued: cancelled at once, its agent never started, its timeline queued then ended', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: {} });
    await host.start(held(gate));
    const queued = (await (await start(host, { prompt: 'echo never' })).json()) as Json;
    const res = await host.request('POST', `/api/headless/${queued.taskId}/cancel`);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ status: 'cancelled' });
    expect(await read(host, queued.taskId)).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' }, exitCode: null });
    expect(await events(host, queued.taskId)).toEqual(['run.queued', 'run.ended']);
    expect((await problem(await host.request('POST', `/api/headless/${queued.taskId}/cancel`))).code).toBe('run_not_running');
    writeFileSync(gate, '');
    await waitFor(() => host.spawner.count === 1, { what: 'no second spawn' });
    expect(host.spawner.count).toBe(1);
  });

  it('a run still queued when its time runs out ends expired, without a process', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: { ttlMs: 50 } });
    await host.start(held(gate));
    const queued = (await (await start(host, { prompt: 'echo late' })).json()) as Json;
    const record = await host.waitEnded(queued.taskId, 30_000);
    expect(record).toMatchObject({ status: 'expired', error: { code: 'expired' } });
    const list = (await (await host.request('GET', '/api/headless?wsId=ws&status=expired')).json()) as { runs: Json[] };
    expect(list.runs.map((r) => r.taskId)).toEqual([queued.taskId]);
    expect(host.spawner.count).toBe(1);
    writeFileSync(gate, '');
  });

  it('wait: true waits through the queue and answers the final record', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: {} });
    const first = await host.start(held(gate));
    const sync = start(host, { prompt: 'echo synced', wait: true });
    await waitFor(async () => (await (await host.request('GET', '/api/headless?wsId=ws&status=queued')).json()).runs.length === 1, {
      what: 'the queued sync run',
    });
    writeFileSync(gate, '');
    const res = await sync;
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'succeeded', mode: 'sync', output: { stdout: expect.stringContaining('synced') } });
    expect((await host.waitEnded(first.taskId)).status).toBe('succeeded');
  });

  it('a resume of a busy Session: 409 session_busy, unless waitForSession, which queues it until the Session frees', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ queue: {} });
    const made = await host.start('session s-1; echo one');
    expect((await host.waitEnded(made.taskId)).status).toBe('succeeded');
    const busy = await host.start(held(gate), { resumeId: made.resumeId });
    expect((await problem(await start(host, { prompt: 'echo three', resumeId: made.resumeId }))).code).toBe('session_busy');
    const waiting = (await (await start(host, { prompt: 'echo three', resumeId: made.resumeId, waitForSession: true })).json()) as Json;
    expect(waiting).toMatchObject({ status: 'queued', resumeId: made.resumeId });
    writeFileSync(gate, '');
    expect((await host.waitEnded(busy.taskId)).status).toBe('succeeded');
    expect(await host.waitEnded(waiting.taskId, 30_000)).toMatchObject({ status: 'succeeded', resumeId: made.resumeId });
    expect((await (await host.request('GET', `/api/sessions/${made.resumeId}`)).json()).runCount).toBe(3);
  });

  it('a queued resume whose Session was retired meanwhile ends failed with session_retired, never started', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: {} });
    const made = await host.start('session s-2; echo one');
    await host.waitEnded(made.taskId);
    await host.start(held(gate));
    const queued = (await (await start(host, { prompt: 'echo two', resumeId: made.resumeId })).json()) as Json;
    expect(queued.status).toBe('queued');
    expect((await host.request('POST', `/api/sessions/${made.resumeId}/retire`)).status).toBe(200);
    writeFileSync(gate, '');
    expect(await host.waitEnded(queued.taskId, 30_000)).toMatchObject({ status: 'failed', error: { code: 'session_retired' } });
    expect(host.spawner.count).toBe(2);
  });

  it('a workspace can opt out, or have its own bound', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({
      maxConcurrentRuns: 1,
      queue: { max: 10 },
      workspaces: [
        { id: 'ws', path: tmpdir(), agents: ['fake'], queue: { max: 1 } },
        { id: 'other', path: tmpdir(), agents: ['fake'], queue: false },
      ],
    });
    await host.start(held(gate));
    expect((await start(host, { prompt: 'echo a' })).status).toBe(202);
    expect((await problem(await start(host, { prompt: 'echo b' }))).code).toBe('queue_full');
    const other = await host.request('POST', '/api/workspaces/other/headless', { json: { agent: 'fake', prompt: 'echo c' } });
    expect((await problem(other)).code).toBe('capacity_reached');
    writeFileSync(gate, '');
  });

  it('bad queue settings are refused when the handler is made', async () => {
    await expect(createTestHost({ queue: { max: 0 } })).rejects.toThrow(/queue.max must be a whole number of at least 1/);
  });
});

describe('a queue that outlives the service', () => {
  it('queued runs survive a restart and start in order on the next one', async () => {
    const data = scratch();
    const gate = join(scratch(), 'go');
    const first = await createTestHost({ maxConcurrentRuns: 1, queue: {}, store: await createSqliteKeyv(data) });
    await first.start(held(gate));
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push(((await (await start(first, { prompt: `echo n${n}` })).json()) as Json).taskId);
    await first.close();
    const second = await createTestHost({ maxConcurrentRuns: 1, queue: {}, store: await createSqliteKeyv(data) });
    const ended = [];
    for (const id of ids) ended.push(await second.waitEnded(id, 30_000));
    expect(ended.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const starts = ended.map((r) => Date.parse(r.startedAt as string));
    expect([...starts].sort((x, y) => x - y)).toEqual(starts);
  });
});
