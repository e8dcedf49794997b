/**
 * @module The stores the service ships as Keyv instances, which the `store` option took before it
 * took the service's own store type (and still takes): in memory (the library's default), and
 * the SQLite and PostgreSQL stores (sql-stores.ts), each carried by the Keyv returned: the service
 * uses that store directly, and the Keyv itself reads and writes its key-value entries.
 */
import { EventEmitter } from 'node:events';
import { Keyv, type KeyvStoreAdapter } from 'keyv';
import type { HeadlessStore } from './headless-store';
import { OWN_STORE } from './keyv-store';
import { createPostgresStore, createSqliteStore } from './sql-stores';

export { redact } from './sql-database';

/** The embedded default: in memory, gone when the process ends. */
export function createMemoryKeyv(): Keyv {
  return new Keyv({ namespace: 'hrw', throwOnErrors: true });
}

/** The SQLite store (sql-stores.ts) as a Keyv, the `store` option's older type. */
export async function createSqliteKeyv(dataDir: string): Promise<Keyv> {
  return ownKeyv(await createSqliteStore(dataDir));
}

/** The PostgreSQL store (sql-stores.ts) as a Keyv, the `store` option's older type. */
export async function createPostgresKeyv(url: string): Promise<Keyv> {
  return ownKeyv(await createPostgresStore(url));
}

/**
 * A Keyv over the store's key-value entries (Keyv's public storage-adapter contract, values
 * passed through unserialized), carrying the store itself for the service.
 */
function ownKeyv(store: HeadlessStore): Keyv {
  const adapter = Object.assign(new EventEmitter(), {
    opts: {},
    namespace: undefined as string | undefined,
    async get(key: string) {
      const value = await store.get(key);
      return value === undefined ? undefined : { value, expires: undefined };
    },
    async set(key: string, data: { value: unknown }, ttl?: number) {
      await store.set(key, data.value, ttl);
      return true;
    },
    async delete(key: string) {
      await store.delete(key);
      return true;
    },
    async clear() {
      throw new Error('clearing the service store through Keyv is not supported');
    },
    disconnect: () => store.close(),
  });
  const keyv = new Keyv({
    store: adapter as unknown as KeyvStoreAdapter,
    serialize: undefined,
    deserialize: undefined,
    useKeyPrefix: false,
    throwOnErrors: true,
  });
  return Object.assign(keyv, { [OWN_STORE]: store });
}
