import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keyv } from 'keyv';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type HeadlessStore, createSqliteStore } from '../../src/core/index';
import { keyvStore } from '../../src/core/store/keyv-store';
import { closeAllHosts, createTestHost } from '../helpers/harness';

/** The `store` option takes the service's own store type, and still a Keyv (docs/library.md: Storage). */

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the store option', () => {
  it('a HeadlessStore is used as given: its own tables hold the runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-store-option-'));
    dirs.push(dir);
    const store = await createSqliteStore(dir);
    const host = await createTestHost({ store });
    const { taskId } = await host.start('echo given');
    expect(await host.waitEnded(taskId)).toMatchObject({ status: 'succeeded' });
    expect(await store.database?.query('SELECT id FROM headless_run')).toEqual([{ id: taskId }]);
    await host.close();
  });

  it("a host's own HeadlessStore is called, not taken for a Keyv", async () => {
    const inner = keyvStore(new Keyv());
    const keys: string[] = [];
    const store: HeadlessStore = {
      ...inner,
      set: (key, value, ttlMs) => {
        keys.push(key);
        return inner.set(key, value, ttlMs);
      },
      table: (spec) => inner.table(spec),
    };
    const host = await createTestHost({ store });
    const { taskId } = await host.start('echo own');
    expect(await host.waitEnded(taskId)).toMatchObject({ status: 'succeeded' });
    expect(keys).toContain(`output:${taskId}`);
    await host.close();
  });

  it('a Keyv is still accepted, wrapped: its entries hold the runs', async () => {
    const keyv = new Keyv();
    const host = await createTestHost({ store: keyv });
    const { taskId } = await host.start('echo wrapped');
    expect(await host.waitEnded(taskId)).toMatchObject({ status: 'succeeded' });
    expect(await keyv.get(`run:${taskId}`)).toMatchObject({ taskId, status: 'succeeded' });
    await host.close();
  });
});
