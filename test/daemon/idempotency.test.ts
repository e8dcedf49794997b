import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { sha256 } from '../../src/core/util/ids';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { api, cleanupDaemons, startDaemon, startFakeDaemon, waitRun } from '../helpers/daemon';
import { type TestHost, closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => cleanupDaemons(dirs));

const start = (host: TestHost, key: string | undefined, body: Record<string, unknown>) =>
  host.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', ...body }, headers: key === undefined ? {} : { 'idempotency-key': key } });

describe('Idempotency-Key on a start', () => {
  it('the same key and body: the first answer again (status, body, Location), marked replayed, nothing started', async () => {
    const host = await createTestHost();
    const first = await start(host, 'key-1', { prompt: 'echo hi' });
    expect(first.status).toBe(202);
    const body = await first.json();
    // The same fields in another order are the same body.
    const again = await host.request('POST', '/api/workspaces/ws/headless', {
      body: '{"prompt":"echo hi","agent":"fake"}',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'key-1' },
    });
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual(body);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(host.spawner.count).toBe(1);
    // Without a key, or with another, a start is a new run.
    expect((await start(host, 'key-2', { prompt: 'echo hi' })).status).toBe(202);
    expect(host.spawner.count).toBe(2);
  });

  it('the same key with another body is 422 idempotency_key_reused', async () => {
    const host = await createTestHost();
    expect((await start(host, 'k', { prompt: 'echo a' })).status).toBe(202);
    expect(await problem(await start(host, 'k', { prompt: 'echo b' }))).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(host.spawner.count).toBe(1);
  });

  it('a retry while the first is still in flight is 409 idempotency_key_in_use; after it, the sync answer is replayed', async () => {
    const host = await createTestHost();
    // Held open until the retry is answered: no race is won by timing.
    const gate = join(mkdtempSync(join(tmpdir(), 'hrw-gate-')), 'open');
    dirs.push(dirname(gate));
    const prompt = `wait-file ${gate}; echo done`;
    const first = start(host, 'sync-key', { prompt, wait: true });
    await waitFor(() => host.spawner.count === 1, { what: 'the first run to start' });
    expect(await problem(await start(host, 'sync-key', { prompt, wait: true }))).toMatchObject({
      status: 409,
      code: 'idempotency_key_in_use',
    });
    writeFileSync(gate, '');
    const answered = await first;
    expect(answered.status).toBe(200);
    const body = (await answered.json()) as Record<string, any>;
    expect(body).toMatchObject({ status: 'succeeded', output: { stdout: 'done\n' } });
    const replay = await start(host, 'sync-key', { prompt, wait: true });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toEqual(body);
    expect(host.spawner.count).toBe(1);
  });

  it('20 simultaneous retries with one key start exactly one run', async () => {
    const host = await createTestHost();
    for (let round = 0; round < 5; round++) {
      const key = `race-${round}`;
      const answers = await Promise.all(Array.from({ length: 20 }, () => start(host, key, { prompt: 'sleep 100' })));
      const accepted = answers.filter((a) => a.status === 202);
      expect(accepted.length).toBeGreaterThanOrEqual(1);
      expect(answers.every((a) => a.status === 202 || a.status === 409)).toBe(true);
      const ids = new Set(await Promise.all(accepted.map(async (a) => ((await a.json()) as { taskId: string }).taskId)));
      expect(ids.size).toBe(1);
      expect(host.spawner.count).toBe(round + 1);
      await host.waitEnded([...ids][0]!);
    }
  });

  it('a start refused before anything ran leaves no trace: the key can be used again', async () => {
    const host = await createTestHost({ maxConcurrentRuns: 1 });
    const busy = await start(host, undefined, { prompt: 'sleep 500' });
    expect(await problem(await start(host, 'later', { prompt: 'echo x' }))).toMatchObject({ status: 429, code: 'capacity_reached' });
    await host.waitEnded(((await busy.json()) as { taskId: string }).taskId);
    const ok = await start(host, 'later', { prompt: 'echo x' });
    expect(ok.status).toBe(202);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
  });

  it('a spawn failure (a run recorded failed) is kept and replayed', async () => {
    const host = await createTestHost({
      agents: { gone: { command: '/nonexistent/agent', args: ['{prompt}'] } },
      workspaces: [{ id: 'ws', path: '/tmp', agents: ['gone'] }],
    });
    const first = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'gone' }, headers: { 'idempotency-key': 'sf' } });
    expect(first.status).toBe(500);
    const body = await first.json();
    const again = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'gone' }, headers: { 'idempotency-key': 'sf' } });
    expect(again.status).toBe(500);
    expect(again.headers.get('content-type')).toBe('application/problem+json');
    expect(await again.json()).toEqual(body);
    expect(host.spawner.count).toBe(1);
  });

  it.each([
    ['empty', ''],
    ['too long', 'k'.repeat(256)],
    ['not ASCII', 'clé'],
  ])('a key that is %s is 400 invalid_idempotency_key', async (_name, key) => {
    const host = await createTestHost();
    const res = await host.request('POST', '/api/workspaces/ws/headless', {
      body: JSON.stringify({ prompt: 'x', agent: 'fake' }),
      headers: { 'content-type': 'application/json', 'idempotency-key': encodeURI(key) === key ? key : 'cl\u00e9' },
    });
    expect(await problem(res)).toMatchObject({ status: 400, code: 'invalid_idempotency_key' });
    expect(host.spawner.count).toBe(0);
  });

  it('an answer kept before version 2 (a release before the upgrade) is replayed as it was: status, body, Location', async () => {
    const store = createMemoryKeyv();
    const host = await createTestHost({ store });
    await start(host, 'before', { prompt: 'echo x' });
    const id = `idem:${sha256('ws\0before')}`;
    const raw = await store.get(id, { raw: true });
    const { version: _, ...entry } = (raw?.value ?? {}) as Record<string, unknown>;
    const location = { location: '/api/headless/run_before' };
    const kept = { status: 202, body: { taskId: 'run_before', resumeId: 'ses_before', status: 'running' }, headers: location };
    await store.set(id, { ...entry, answer: kept }, (raw?.expires ?? 0) - Date.now());
    const again = await start(host, 'before', { prompt: 'echo x' });
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual(kept.body);
    expect(again.headers.get('location')).toBe(location.location);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(host.spawner.count).toBe(1);
  });

  it('keys are kept for 24 h, then expire', async () => {
    const store = createMemoryKeyv();
    const host = await createTestHost({ store });
    const before = Date.now();
    await start(host, 'ttl', { prompt: 'echo x' });
    // Keys are stored hashed, scoped by workspace.
    const raw = await store.get(`idem:${sha256('ws\0ttl')}`, { raw: true });
    expect(raw?.value).toMatchObject({ version: 2, state: 'done', answer: { status: 202 } });
    expect(raw!.expires! - before).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    expect(raw!.expires! - Date.now()).toBeLessThanOrEqual(24 * 3600 * 1000);
  });
});

describe('Idempotency-Key through the daemon', () => {
  it('the answer survives a restart', async () => {
    const first = await startFakeDaemon(dirs);
    const send = (daemon: typeof first) =>
      api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', agent: 'fake' }, { 'idempotency-key': 'restart-key' });
    const a = await send(first);
    expect(a.status).toBe(202);
    const { taskId } = (await a.json()) as { taskId: string };
    await waitRun(first, taskId);
    expect(await first.stop()).toBe(0);
    const second = await startDaemon(first.dir);
    const b = await send(second);
    expect(b.status).toBe(202);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(((await b.json()) as { taskId: string }).taskId).toBe(taskId);
    const list = (await (await api(second, 'GET', '/api/headless?wsId=ws')).json()) as { runs: unknown[] };
    expect(list.runs).toHaveLength(1);
    await second.stop();
  });
});
