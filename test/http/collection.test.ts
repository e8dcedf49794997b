import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Keyv } from 'keyv';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryKeyv, createPostgresKeyv, createSqliteKeyv } from '../../src/core/index';
import { keyvStore } from '../../src/core/store/keyv-store';
import { closeAllHosts, createTestHost } from '../helpers/harness';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';

/** The lookups of runs and the Inbox over every store: in memory, and as expression indexes over the records in SQLite and PostgreSQL. */

const dirs: string[] = [];
let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
}, 600_000);
afterEach(closeAllHosts);
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await postgres?.stop();
});

const sqliteDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-index-'));
  dirs.push(dir);
  return dir;
};

const stores: Array<[string, () => Promise<() => Promise<Keyv>>]> = [
  [
    'memory',
    async () => {
      const keyv = createMemoryKeyv();
      return async () => keyv;
    },
  ],
  [
    'sqlite',
    async () => {
      const dir = sqliteDir();
      return () => createSqliteKeyv(dir);
    },
  ],
  [
    'postgres',
    async () => {
      const url = await postgres.database();
      return () => createPostgresKeyv(url);
    },
  ],
];

describe.each(stores)('list index: %s', (name, make) => {
  it('pages newest first without gaps or repeats, filters by status, and is right after a restart', async () => {
    const open = await make();
    const host = await createTestHost({ store: await open() });
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { taskId } = await host.start(i % 3 === 0 ? 'exit 1' : 'echo x');
      await host.waitEnded(taskId);
      ids.push(taskId);
    }
    const { taskId: running } = await host.start('sleep 30000');
    const pages = async (query: string) => {
      const seen: string[] = [];
      let cursor = '';
      for (let i = 0; i < 10; i++) {
        const page = (await (await host.request('GET', `/api/headless?wsId=ws&limit=3${query}${cursor}`)).json()) as {
          runs: Array<{ taskId: string }>;
          nextCursor: string | null;
        };
        seen.push(...page.runs.map((r) => r.taskId));
        if (page.nextCursor === null) return seen;
        cursor = `&cursor=${page.nextCursor}`;
      }
      throw new Error('too many pages');
    };
    expect(await pages('')).toEqual([running, ...[...ids].reverse()]);
    expect(await pages('&status=failed')).toEqual([ids[6], ids[3], ids[0]]);
    expect(await pages('&status=running')).toEqual([running]);
    expect(await pages('&status=timed_out')).toEqual([]);
    await host.request('POST', `/api/headless/${running}/cancel`);
    await host.waitEnded(running);
    expect(await pages('&status=running')).toEqual([]);
    expect(await pages('&status=cancelled')).toEqual([running]);
    if (name === 'memory') return;
    await host.close();
    const again = await createTestHost({ store: await open() });
    const list = (await (await again.request('GET', '/api/headless?wsId=ws&limit=50')).json()) as { runs: Array<{ taskId: string }> };
    expect(list.runs.map((r) => r.taskId)).toEqual([running, ...[...ids].reverse()]);
  });

  it('the Inbox: newest first, unread filter, mark read, and right after a restart', async () => {
    const open = await make();
    const host = await createTestHost({ store: await open() });
    const push = async (title: string, ws = 'ws') =>
      ((await (await host.request('POST', `/api/workspaces/${ws}/inbox`, { json: { title } })).json()) as { id: string }).id;
    const a = await push('a');
    const b = await push('b');
    const c = await push('c');
    await push('elsewhere', 'other');
    await host.request('POST', `/api/workspaces/ws/inbox/${b}/read`);
    const titles = async (h: typeof host, query = '') =>
      ((await (await h.request('GET', `/api/workspaces/ws/inbox${query}`)).json()) as { items: Array<{ id: string }> }).items.map((i) => i.id);
    expect(await titles(host)).toEqual([c, b, a]);
    expect(await titles(host, '?unread=true')).toEqual([c, a]);
    const page = (await (await host.request('GET', '/api/workspaces/ws/inbox?limit=2')).json()) as { nextCursor: string };
    expect(await titles(host, `?limit=2&cursor=${page.nextCursor}`)).toEqual([a]);
    if (name === 'memory') return;
    await host.close();
    const again = await createTestHost({ store: await open() });
    expect(await titles(again, '?unread=true')).toEqual([c, a]);
  });
});

describe.each(stores.filter(([name]) => name !== 'memory'))('record tables of their own: %s', (name, make) => {
  it('runs are rows with real columns and indexes in tables of the service, so the one write of a record is all a list needs', async () => {
    const open = await make();
    const host = await createTestHost({ store: await open() });
    const { taskId } = await host.start('echo x');
    await host.waitEnded(taskId);
    await host.close();
    const keyv = await open();
    const db = keyvStore(keyv).database;
    if (!db) throw new Error('the service store has its database');
    const tables =
      name === 'sqlite'
        ? await db.query<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
        : await db.query<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public'");
    expect(
      tables
        .map((t) => t.name)
        .filter((t) => !['headless_instances', 'headless_claims', 'headless_served'].includes(t))
        .sort(),
    ).toEqual(['headless_approvals', 'headless_inbox', 'headless_kv', 'headless_run', 'headless_schema_version', 'headless_trigger_deliveries']);
    const [row] = await db.query<{ grp: string; bucket: string; owner: string; record: string }>(
      'SELECT grp, bucket, owner, record FROM headless_run WHERE id = ?',
      [taskId],
    );
    expect(row).toMatchObject({ grp: 'ws', bucket: 'succeeded' });
    // A row written by its columns (as another instance's write would be) is listed and found by its status.
    const copy = { ...JSON.parse(row?.record ?? '{}'), taskId: `${taskId}x`, status: 'running', endedAt: null, bootId: 'boot_gone' };
    await db.query('INSERT INTO headless_run (id, grp, bucket, owner, flag_deliverydueat, record) VALUES (?, ?, ?, ?, NULL, ?)', [
      `${taskId}x`,
      'ws',
      'running',
      'boot_gone',
      JSON.stringify(copy),
    ]);
    // The planner answers a list page from the table's index, not by reading the table.
    if (name === 'sqlite') {
      const plan = JSON.stringify(await db.query("EXPLAIN QUERY PLAN SELECT id FROM headless_run WHERE grp = 'ws' ORDER BY id DESC LIMIT 5"));
      expect(plan).toMatch(/headless_run_grp/);
    }
    await keyv.disconnect();
    const again = await createTestHost({ store: await open() });
    const list = (await (await again.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string; status: string }> };
    // The copy was left running by an instance that is gone: the next start interrupts it.
    expect(list.runs.map((r) => [r.taskId, r.status])).toEqual([
      [`${taskId}x`, 'interrupted'],
      [taskId, 'succeeded'],
    ]);
  });
});
