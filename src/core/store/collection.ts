/**
 * @module A record table over a key-value store (any Keyv a host passes): each record one entry
 * under `${name}:`, its lookups kept in memory, rebuilt from the records at every start and
 * updated as each write succeeds. Such a store is never shared by other instances, so a
 * compare-and-set is a plain write.
 */
import { type CollectionSpec, type RecordTable, bucketOf } from './headless-store';
import { OrderedIndex } from './memory-index';

/** The key-value operations the table is kept in. */
export interface KeyValue {
  get<T>(key: string): Promise<T | undefined>;
  getMany<T>(keys: string[]): Promise<(T | undefined)[]>;
  set(key: string, value: unknown): Promise<void>;
  delete(key: string): Promise<void>;
  scan<T>(prefix: string): AsyncIterable<[key: string, value: T]>;
}

export function keyValueTable<T extends object>(kv: KeyValue, spec: CollectionSpec<T>): RecordTable<T> {
  const prefix = `${spec.name}:`;
  const index = new OrderedIndex<string>();
  const placed = new Map<string, { group: string; bucket: string }>();
  const flags = new Map<string, Set<string>>((spec.flags ?? []).map((f) => [f, new Set<string>()]));
  const field = (value: T, name: string) => (value as Record<string, unknown>)[name];

  const wrote = (id: string, value: T) => {
    const group = String(field(value, spec.group));
    const bucket = bucketOf(spec, value);
    const was = placed.get(id);
    if (!was) index.add(group, id, bucket);
    else if (was.bucket !== bucket) index.move(group, id, was.bucket, bucket);
    placed.set(id, { group, bucket });
    for (const [flag, ids] of flags) {
      if (field(value, flag) === undefined || field(value, flag) === null) ids.delete(id);
      else ids.add(id);
    }
  };
  const put = async (id: string, value: T) => {
    await kv.set(prefix + id, value);
    wrote(id, value);
  };

  return {
    async load() {
      for await (const [key, value] of kv.scan<T>(prefix)) wrote(key.slice(prefix.length), value);
    },
    get: (id) => kv.get<T>(prefix + id),
    getMany: (ids) => kv.getMany<T>(ids.map((id) => prefix + id)),
    put,
    async putIf(id, value) {
      await put(id, value);
      return true;
    },
    async delete(id) {
      await kv.delete(prefix + id);
      const was = placed.get(id);
      if (was) index.delete(was.group, id, was.bucket);
      placed.delete(id);
      for (const ids of flags.values()) ids.delete(id);
    },
    page: async (group, bucket, limit, cursor) => index.page(group, bucket, limit, cursor),
    inBucket: async (bucket) => index.inBucket(bucket).map((e) => e.id),
    count: async (bucket, before) => index.inBucket(bucket).filter((e) => before === undefined || e.id < before).length,
    flagged: async (flag) => [...(flags.get(flag) ?? [])],
    oldest: async (bound, limit) => index.oldest(bound, limit).map((e) => e.id),
  };
}
