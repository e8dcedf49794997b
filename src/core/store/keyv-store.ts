/**
 * @module The store over a Keyv instance, through Keyv's public API alone: any Keyv a host passes
 * (in memory, Redis, its own), records kept as entries with their lookups in memory. The Keyv
 * the service makes for its own SQL database (keyvs.ts) carries that database's store, which is
 * used instead.
 */
import type { Keyv } from 'keyv';
import { StorageError } from '../../contract/problems';
import { keyValueTable } from './collection';
import type { HeadlessStore } from './headless-store';

export type { HeadlessStore } from './headless-store';

/** Where a Keyv made by the service carries the store of its own database. */
export const OWN_STORE = Symbol.for('headless-run-webhook.store');

function fail(operation: string, error: unknown): never {
  const reason = error instanceof Error ? error.message : String(error);
  throw new StorageError(`store ${operation} failed: ${reason}`, { cause: error });
}

/** The `store` option as the service uses it: the service's own store type as given, a Keyv wrapped (keyvStore). */
export function asHeadlessStore(store: HeadlessStore | Keyv): HeadlessStore {
  return isHeadlessStore(store) ? store : keyvStore(store);
}

// A Keyv has no `table`; checked by shape, since a host's Keyv may come from another copy of the package.
const isHeadlessStore = (store: HeadlessStore | Keyv): store is HeadlessStore => typeof (store as Partial<HeadlessStore>).table === 'function';

/** Wraps a Keyv instance. `throwOnErrors` is switched on: keyv's default swallows write errors. */
export function keyvStore(keyv: Keyv): HeadlessStore {
  const own = (keyv as Keyv & { [OWN_STORE]?: HeadlessStore })[OWN_STORE];
  if (own) return own;
  keyv.throwOnErrors = true;

  async function* scan<T>(prefix: string): AsyncIterable<[string, T]> {
    const iterator = keyv.iterator;
    if (!iterator) throw new StorageError('this Keyv store cannot be iterated; use an iterable store');
    try {
      for await (const [key, value] of iterator.call(keyv, keyv.namespace)) {
        if (typeof key === 'string' && key.startsWith(prefix)) yield [key, value as T];
      }
    } catch (error) {
      fail('scan', error);
    }
  }

  const store: HeadlessStore = {
    async get<T>(key: string) {
      try {
        return (await keyv.get<T>(key)) ?? undefined;
      } catch (error) {
        fail('read', error);
      }
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return [];
      try {
        return (await keyv.getMany<T>(keys)).map((v) => v ?? undefined);
      } catch (error) {
        fail('read', error);
      }
    },
    async set(key, value, ttlMs) {
      let ok: boolean;
      try {
        ok = await keyv.set(key, value, ttlMs);
      } catch (error) {
        fail('write', error);
      }
      if (!ok) fail('write', 'the store reported the write as not done');
    },
    async delete(key) {
      try {
        await keyv.delete(key);
      } catch (error) {
        fail('delete', error);
      }
    },
    scan,
    table: (spec) => keyValueTable(store, spec),
    async close() {
      await keyv.disconnect();
    },
  };
  return store;
}
