import type { HeadlessStore } from './keyv-store';
import { OrderedIndex, type Page } from './memory-index';
import type { CollectionSpec, RecordLookups } from './record-lookups';
import { sqlRecordQueries } from './sql-record-index';

interface MemoryLookups extends RecordLookups {
  wrote(id: string, value: unknown): void;
  deleted(id: string): void;
}

/**
 * Records of one kind (runs, Inbox items) under one key prefix, with their lookups
 * (record-lookups.ts): one write per state change, the lookups derived from the records.
 */
export class Collection<T extends object> {
  private readonly lookups: RecordLookups & Partial<MemoryLookups>;

  constructor(
    private readonly store: HeadlessStore,
    private readonly spec: CollectionSpec<T>,
  ) {
    this.lookups = store.sql ? sqlRecordQueries(store.sql, spec) : memoryLookups(store, spec);
  }

  load(): Promise<void> {
    return this.lookups.load();
  }

  get(id: string): Promise<T | undefined> {
    return this.store.get<T>(this.spec.prefix + id);
  }

  getMany(ids: string[]): Promise<Array<T | undefined>> {
    return this.store.getMany<T>(ids.map((id) => this.spec.prefix + id));
  }

  /** The one write of a state change; throws `StorageError` if the store refuses it. */
  async put(id: string, value: T): Promise<void> {
    await this.store.set(this.spec.prefix + id, value);
    this.lookups.wrote?.(id, value);
  }

  /**
   * The write of a record other instances may write too: only if its `expected` fields still
   * hold (a compare-and-set in SQL); false if another write came first. Stores without SQL are
   * never shared: there it is a plain write.
   */
  async putIf(id: string, value: T, expected: Record<string, string>): Promise<boolean> {
    if (!this.store.sql) {
      await this.put(id, value);
      return true;
    }
    return this.store.sql.setIf(this.spec.prefix + id, value, expected);
  }

  async delete(id: string): Promise<void> {
    await this.store.delete(this.spec.prefix + id);
    this.lookups.deleted?.(id);
  }

  page(group: string, bucket: string | undefined, limit: number, cursor?: string): Promise<Page> {
    return this.lookups.page(group, bucket, limit, cursor);
  }

  inBucket(bucket: string): Promise<string[]> {
    return this.lookups.inBucket(bucket);
  }

  flagged(flag: keyof T & string): Promise<string[]> {
    return this.lookups.flagged(flag);
  }

  oldest(bound: string, limit: number): Promise<string[]> {
    return this.lookups.oldest(bound, limit);
  }
}

/** The lookups of a store without SQL: in memory, from one scan at start-up. */
function memoryLookups<T>(store: HeadlessStore, spec: CollectionSpec<T>): MemoryLookups {
  const index = new OrderedIndex<string>();
  const placed = new Map<string, { group: string; bucket: string }>();
  const flags = new Map<string, Set<string>>((spec.flags ?? []).map((f) => [f, new Set<string>()]));
  const field = (value: unknown, name: string) => (value as Record<string, unknown>)[name];
  const { bucket: by } = spec;
  const bucketOf = (value: unknown) => {
    const v = field(value, by.field);
    if (by.set === undefined) return String(v);
    return v === undefined || v === null ? by.unset! : by.set;
  };
  const lookups: MemoryLookups = {
    async load() {
      for await (const [key, value] of store.scan<T>(spec.prefix)) lookups.wrote(key.slice(spec.prefix.length), value);
    },
    wrote(id, value) {
      const group = String(field(value, spec.group));
      const bucket = bucketOf(value);
      const was = placed.get(id);
      if (!was) index.add(group, id, bucket);
      else if (was.bucket !== bucket) index.move(group, id, was.bucket, bucket);
      placed.set(id, { group, bucket });
      for (const [flag, ids] of flags) {
        if (field(value, flag) === undefined || field(value, flag) === null) ids.delete(id);
        else ids.add(id);
      }
    },
    deleted(id) {
      const was = placed.get(id);
      if (was) index.delete(was.group, id, was.bucket);
      placed.delete(id);
      for (const ids of flags.values()) ids.delete(id);
    },
    page: async (group, bucket, limit, cursor) => index.page(group, bucket, limit, cursor),
    inBucket: async (bucket) => index.inBucket(bucket).map((e) => e.id),
    flagged: async (flag) => [...(flags.get(flag) ?? [])],
    oldest: async (bound, limit) => index.oldest(bound, limit).map((e) => e.id),
  };
  return lookups;
}
