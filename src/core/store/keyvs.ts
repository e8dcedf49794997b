/**
 * @module The stores the service ships, as the Keyv instances the `store` option takes: in memory
 * (the library's default), SQLite (the daemon's) and PostgreSQL (a fleet's). The last two are the
 * service's own SQL database (sql-store.ts), carried by the Keyv they return: the service uses
 * the database directly, and the Keyv itself reads and writes its key-value entries.
 */
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { Keyv, type KeyvStoreAdapter } from 'keyv';
import type { HeadlessStore } from './headless-store';
import { OWN_STORE } from './keyv-store';
import { openPostgres, openSqlite } from './sql-database';
import { prepareKeyValue, sqlStore } from './sql-store';

export { redact } from './sql-database';

/** The embedded default: in memory, gone when the process ends. */
export function createMemoryKeyv(): Keyv {
  return new Keyv({ namespace: 'hrw', throwOnErrors: true });
}

/** The daemon's store: a SQLite file under `dataDir` (sql-database.ts: durable, private, WAL). */
export async function createSqliteKeyv(dataDir: string): Promise<Keyv> {
  const db = await openSqlite(dataDir, join(dataDir, 'headless.sqlite'));
  try {
    await prepareKeyValue(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return ownKeyv(sqlStore(db));
}

/**
 * A store in PostgreSQL, which several instances may share (docs/deployment.md: Running several
 * instances). Connects once, so a wrong URL fails here, saying which.
 */
export async function createPostgresKeyv(url: string): Promise<Keyv> {
  const db = await openPostgres(url);
  try {
    await prepareKeyValue(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return ownKeyv(sqlStore(db));
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
