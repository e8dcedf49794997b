import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createSqliteKeyv } from '../../src/core/index';
import { Retention } from '../../src/core/retention';
import { keyvStore } from '../../src/core/store/keyv-store';
import { closeAllHosts, createTestHost } from '../helpers/harness';
import { closeReceivers, startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';

const dirs: string[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await closeAllHosts();
  await closeReceivers();
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const DAY = 24 * 60 * 60 * 1000;
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

/** Every key in the SQLite store (a record named by its table: `run:<id>`, `inbox:<id>`), for checking that nothing of a pruned run is left. */
async function keys(dir: string): Promise<string[]> {
  const keyv = await createSqliteKeyv(dir);
  const db = keyvStore(keyv).database;
  const query = (sql: string) => db?.query<{ key: string }>(sql) ?? Promise.resolve([]);
  const rows = [
    ...(await query('SELECT key FROM headless_kv')),
    ...(await query("SELECT 'run:' || id AS key FROM headless_run")),
    ...(await query("SELECT 'inbox:' || id AS key FROM headless_inbox")),
  ];
  await keyv.disconnect();
  return rows.map((r) => r.key);
}

describe('retention', () => {
  it('deletes ended runs (record with its outbox, output, events), their Sessions, Inbox items and expired idempotency keys older than retentionDays; keeps the rest', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-retention-'));
    dirs.push(dir);
    const receiver = await startReceiver();
    const options = async (retentionDays?: number) => ({
      store: await createSqliteKeyv(dir),
      webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true },
      ...(retentionDays === undefined ? {} : { retentionDays }),
    });

    // Forty days ago (only the clock is moved; timers and processes run as usual).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 40 * DAY });
    const past = await createTestHost(await options());
    const old = await past.start('session old-1; echo old', { webhook: { url: receiver.url } });
    await past.waitEnded(old.taskId);
    await waitFor(() => receiver.received.length === 1, { what: 'the old run’s webhook' });
    const oldItem = (await (await past.request('POST', '/api/workspaces/ws/inbox', { json: { title: 'old' } })).json()) as { id: string };
    const idem = await past.request('POST', '/api/workspaces/ws/headless', {
      json: { prompt: 'echo x', agent: 'fake' },
      headers: { 'idempotency-key': 'old-key' },
    });
    await past.waitEnded(((await idem.json()) as { taskId: string }).taskId);
    await past.close();
    vi.useRealTimers();

    const before = await keys(dir);
    expect(before.filter((k) => k.includes(old.taskId)).length).toBeGreaterThanOrEqual(4);

    // Today: a recent run and item, then a restart with the default (30 days) prunes at once.
    const today = await createTestHost(await options());
    const recent = await today.start('echo recent');
    await today.waitEnded(recent.taskId);
    await today.request('POST', '/api/workspaces/ws/inbox', { json: { title: 'recent' } });
    await today.close();

    const retained = await createTestHost(await options());
    await waitFor(async () => (await retained.request('GET', `/api/headless/${old.taskId}`)).status === 404, { what: 'the old run to be pruned' });
    await waitFor(async () => !(await keys(dir)).some((k) => k.startsWith('idem:')), { what: 'the expired key to be pruned' });
    const after = await keys(dir);
    expect(after.filter((k) => k.includes(old.taskId))).toEqual([]);
    expect(after).not.toContain(`inbox:${oldItem.id}`);
    // Its Session went with it (its last run is older than what is kept); the recent one's stays.
    await waitFor(async () => (await retained.request('GET', `/api/sessions/${old.resumeId}`)).status === 404, { what: 'the old Session to be pruned' });
    expect((await retained.request('GET', `/api/sessions/${recent.resumeId}`)).status).toBe(200);
    expect((await retained.request('GET', `/api/headless/${recent.taskId}`)).status).toBe(200);
    expect((await retained.request('GET', `/api/headless/${recent.taskId}/events?format=json`)).status).toBe(200);
    const inbox = (await (await retained.request('GET', '/api/workspaces/ws/inbox')).json()) as { items: Array<{ title: string }> };
    expect(inbox.items.map((i) => i.title)).toEqual(['recent']);
    const list = (await (await retained.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string }> };
    expect(list.runs.map((r) => r.taskId)).toEqual([recent.taskId]);
  });

  it('retentionDays: 0 keeps everything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-retention-'));
    dirs.push(dir);
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 400 * DAY });
    const past = await createTestHost({ store: await createSqliteKeyv(dir) });
    const { taskId } = await past.start('echo kept');
    await past.waitEnded(taskId);
    await past.close();
    vi.useRealTimers();
    // With 0 no pass is ever started (a pass is started synchronously as the handler starts), so the run stays.
    const prune = vi.spyOn(Retention.prototype, 'prune');
    const host = await createTestHost({ store: await createSqliteKeyv(dir), retentionDays: 0 });
    expect(prune).not.toHaveBeenCalled();
    prune.mockRestore();
    expect((await host.request('GET', `/api/headless/${taskId}`)).status).toBe(200);
  });

  it('a bad retentionDays is refused when the handler is made', async () => {
    await expect(createTestHost({ retentionDays: -1 })).rejects.toThrow(/retentionDays must be a number of days, 0 or more/);
  });
});
