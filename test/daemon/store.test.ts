import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OrderedIndex } from '../../src/core/store/memory-index';
import { StorageError } from '../../src/contract/problems';
import { type HeadlessStore, keyvStore } from '../../src/core/store/keyv-store';
import { createMemoryKeyv, createPostgresKeyv, createSqliteKeyv } from '../../src/core/store/keyvs';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';
import { noneMarked } from '../helpers/processes';
import { refusingKeyv } from '../helpers/stores';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
afterEach(closeAllHosts);

const implementations: Array<[string, () => Promise<{ store: HeadlessStore; reopen?: () => Promise<HeadlessStore> }>]> = [
  ['memory', async () => ({ store: keyvStore(createMemoryKeyv()) })],
  [
    'sqlite',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hrw-store-'));
      dirs.push(dir);
      return { store: keyvStore(await createSqliteKeyv(dir)), reopen: async () => keyvStore(await createSqliteKeyv(dir)) };
    },
  ],
  [
    'postgres',
    async () => {
      const url = await postgres.database();
      return { store: keyvStore(await createPostgresKeyv(url)), reopen: async () => keyvStore(await createPostgresKeyv(url)) };
    },
  ],
];

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
}, 600_000);
afterAll(() => postgres?.stop());

/** One conformance suite, run against every store the project ships. */
describe.each(implementations)('store conformance: %s', (_name, make) => {
  it('writes, reads and reads many', async () => {
    const { store } = await make();
    await store.set('run:a', { n: 1, nested: { s: 'x' } });
    await store.set('run:b', { n: 2 });
    expect(await store.get('run:a')).toEqual({ n: 1, nested: { s: 'x' } });
    expect(await store.get('run:missing')).toBeUndefined();
    expect(await store.getMany(['run:b', 'run:missing', 'run:a'])).toEqual([{ n: 2 }, undefined, { n: 1, nested: { s: 'x' } }]);
    expect(await store.getMany([])).toEqual([]);
    await store.close();
  });

  it('returns copies: changing a read value does not change the store', async () => {
    const { store } = await make();
    const value = { n: 1 };
    await store.set('k:1', value);
    value.n = 2;
    const read = (await store.get<{ n: number }>('k:1'))!;
    read.n = 3;
    expect(await store.get('k:1')).toEqual({ n: 1 });
    await store.close();
  });

  it('scans one prefix completely, past batch boundaries, and nothing else', async () => {
    const { store } = await make();
    const writes = [];
    for (let i = 0; i < 2100; i++) writes.push(store.set(`run:${String(i).padStart(5, '0')}`, { i }));
    writes.push(store.set('runner:x', { other: true }), store.set('session:s', { s: 1 }));
    await Promise.all(writes);
    const seen: number[] = [];
    for await (const [key, value] of store.scan<{ i: number }>('run:')) {
      expect(key.startsWith('run:')).toBe(true);
      seen.push(value.i);
    }
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 2100 }, (_, i) => i));
    await store.close();
  });

  it('a prefix is literal: _ and % match only themselves', async () => {
    const { store } = await make();
    await Promise.all([store.set('a_b:1', 1), store.set('axb:2', 2), store.set('a%b:3', 3), store.set('a_b:4', 4)]);
    const keys: string[] = [];
    for await (const [key] of store.scan('a_b:')) keys.push(key);
    expect(keys.sort()).toEqual(['a_b:1', 'a_b:4']);
    await store.close();
  });

  it('keeps data across a reopen (when durable)', async () => {
    const { store, reopen } = await make();
    if (!reopen) return;
    await store.set('run:keep', { kept: true });
    await store.close();
    const again = await reopen();
    expect(await again.get('run:keep')).toEqual({ kept: true });
    await again.close();
  });
});

describe('postgres stores', () => {
  it('several stores in one process each keep their own connections: closing one leaves the others working', async () => {
    const [url, other] = [await postgres.database(), await postgres.database()];
    const first = keyvStore(await createPostgresKeyv(url));
    const second = keyvStore(await createPostgresKeyv(url));
    const elsewhere = keyvStore(await createPostgresKeyv(other));
    await first.set('k', 1);
    await first.close();
    expect(await second.get('k')).toBe(1);
    await elsewhere.set('k', 2);
    await second.close();
    expect(await elsewhere.get('k')).toBe(2);
    await elsewhere.close();
  });

  it('an unreachable server is a StorageError that hides the password', async () => {
    await expect(createPostgresKeyv('postgresql://u:secret@127.0.0.1:9/x')).rejects.toThrow(/^cannot open postgresql:\/\/u:\*\*\*@127\.0\.0\.1:9\/x: /);
  });
});

describe('sqlite durability settings', () => {
  it('uses WAL, its fsync after each commit taken out of COMMIT (synchronous=NORMAL) and done before any answer (wal-sync.test.ts)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-store-'));
    dirs.push(dir);
    const keyv = await createSqliteKeyv(dir);
    const db = keyvStore(keyv).database;
    expect(await db?.query('PRAGMA journal_mode')).toEqual([{ journal_mode: 'wal' }]);
    // Per connection: the service's own.
    expect(await db?.query('PRAGMA synchronous')).toEqual([{ synchronous: 1 }]);
    await keyv.disconnect();
  });
});

describe('a store that refuses writes', () => {
  it.each(['throw', 'false'] as const)('keyvStore turns a refused write (%s) into StorageError', async (mode) => {
    const { keyv, state } = refusingKeyv(mode);
    const store = keyvStore(keyv);
    state.failing = true;
    await expect(store.set('run:x', { a: 1 })).rejects.toBeInstanceOf(StorageError);
  });

  it('a start against it is 503 storage_unavailable, no 2xx, no process; the service recovers', async () => {
    const { keyv, state } = refusingKeyv('throw');
    const host = await createTestHost({ store: keyv });
    state.failing = true;
    for (let i = 0; i < 3; i++) {
      const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } });
      expect(await problem(res)).toMatchObject({ status: 503, code: 'storage_unavailable' });
    }
    expect(host.spawner.count).toBe(0);
    expect((await host.request('GET', '/api/headless?wsId=ws')).status).toBe(200);
    state.failing = false;
    const ok = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', wait: true } });
    expect(ok.status).toBe(200);
    // Capacity was not leaked by the refused starts.
    const list = (await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: unknown[] };
    expect(list.runs).toHaveLength(1);
  });
});

describe('a store that refuses the record of a started process', () => {
  it('answers 503, stops the process, and records the run failed with storage_unavailable, not interrupted', async () => {
    const { keyv, state } = refusingKeyv('throw');
    const host = await createTestHost({ store: keyv });
    state.refuse = (key, value) => key.includes('run:') && String(value).includes('"process":');
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'sleep 20000', agent: 'fake' } });
    expect(await problem(res)).toMatchObject({ status: 503, code: 'storage_unavailable' });
    expect(host.spawner.count).toBe(1);
    state.refuse = undefined;
    const { runs } = (await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<Record<string, any>> };
    expect(runs).toHaveLength(1);
    const record = await host.waitEnded(runs[0]!.taskId);
    expect(record).toMatchObject({ status: 'failed', signal: 'SIGKILL', error: { code: 'storage_unavailable' } });
    expect((record.error as { message: string }).message).not.toMatch(/service stopped/i);
    expect(await noneMarked([runs[0]!.taskId])).toBe(true);
  });
});

describe('ordered index', () => {
  it('pages newest first within a bucket, moving ids between buckets', () => {
    const index = new OrderedIndex<'a' | 'b'>();
    for (const id of ['id1', 'id3', 'id2', 'id5', 'id4']) index.add('g', id, 'a');
    index.move('g', 'id3', 'a', 'b');
    expect(index.page('g', undefined, 2)).toEqual({ ids: ['id5', 'id4'], next: 'id4' });
    expect(index.page('g', undefined, 2, 'id4')).toEqual({ ids: ['id3', 'id2'], next: 'id2' });
    expect(index.page('g', undefined, 2, 'id2')).toEqual({ ids: ['id1'], next: null });
    expect(index.page('g', 'a', 10)).toEqual({ ids: ['id5', 'id4', 'id2', 'id1'], next: null });
    expect(index.page('g', 'b', 10)).toEqual({ ids: ['id3'], next: null });
    expect(index.page('nope', undefined, 10)).toEqual({ ids: [], next: null });
  });
});

describe('the CommonJS build', () => {
  it('opens the SQLite store through require()', async () => {
    const { spawnSync } = await import('node:child_process');
    const dir = mkdtempSync(join(tmpdir(), 'hrw-cjs-'));
    dirs.push(dir);
    const script = `const { createSqliteKeyv } = require('./dist/index.cjs');
      (async () => { const kv = await createSqliteKeyv(${JSON.stringify(dir)}); await kv.set('a', 1); console.log(await kv.get('a')); await kv.disconnect(); })();`;
    const r = spawnSync(process.execPath, ['-e', script], { cwd: join(__dirname, '../..'), encoding: 'utf8' });
    expect(`${r.stdout}${r.stderr}`.trim()).toBe('1');
  });
});
