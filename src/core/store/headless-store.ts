/**
 * @module What the service stores, as it asks for it: key-value entries (Sessions, idempotency
 * keys, timelines, outputs, schedule state) and record tables (runs, Inbox items) whose lookups
 * the lists, crash recovery, the outbox and retention need. Two implementations: over any Keyv
 * (keyv-store.ts: the record lookups kept in memory) and over the service's own SQL database
 * (sql-store.ts: tables with real columns and indexes).
 */
import type { Page } from './memory-index';
import type { SqlDatabase } from './sql-database';

/**
 * The persistence the service needs. Keys are `kind:id`. Every failure surfaces as a thrown
 * `StorageError` (answered 503), never a silent `false`.
 */
export interface HeadlessStore {
  get<T>(key: string): Promise<T | undefined>;
  getMany<T>(keys: string[]): Promise<(T | undefined)[]>;
  /** `ttlMs`: the entry expires after this long (reads then find nothing). */
  set(key: string, value: unknown, ttlMs?: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Every entry whose key starts with `prefix`, in one pass, expired ones too where the store keeps them. Used at start-up and by retention. */
  scan<T>(prefix: string): AsyncIterable<[key: string, value: T]>;
  /** A table of records of one kind, with its lookups. */
  table<T extends object>(spec: CollectionSpec<T>): RecordTable<T>;
  /** The SQL database under it, where it is the service's own (a fleet on PostgreSQL uses it). */
  database?: SqlDatabase;
  close(): Promise<void>;
}

/** A kind of record (runs, Inbox items) and the fields its lookups read. */
export interface CollectionSpec<T> {
  /** Its table (SQL) or key prefix (key-value, `${name}:`); ids sort in creation order. */
  name: string;
  /** The field lists are grouped by (a workspace id). */
  group: keyof T & string;
  /**
   * What sorts a record into a bucket: a field's value (a status), or, with `set`/`unset`, whether
   * the field is set (an Inbox item's `readAt`: `read` or `unread`).
   */
  bucket: { field: keyof T & string; set?: string; unset?: string };
  /** Fields whose presence is looked up (a pending delivery's due time). */
  flags?: Array<keyof T & string>;
  /** The field naming the record's owner, which a compare-and-set may expect (a run's instance). */
  owner?: keyof T & string;
}

/**
 * Records of one kind with their lookups, derived from the records: a state change is ONE write
 * of the record, and no lookup can disagree with it.
 */
export interface RecordTable<T> {
  /** Prepares it (creates the table and its indexes, or reads every record into memory). Start-up only. */
  load(): Promise<void>;
  get(id: string): Promise<T | undefined>;
  getMany(ids: string[]): Promise<Array<T | undefined>>;
  put(id: string, value: T): Promise<void>;
  /**
   * The write of a record other instances may write too: only if the stored one's bucket and
   * owner are still `expected` (a compare-and-set); false if another write came first. A store
   * no other instance can share makes it a plain write.
   */
  putIf(id: string, value: T, expected: { bucket: string; owner: string }): Promise<boolean>;
  delete(id: string): Promise<void>;
  /** Newest first, ids strictly older than `cursor`. */
  page(group: string, bucket: string | undefined, limit: number, cursor?: string): Promise<Page>;
  /** Every id in `bucket`. */
  inBucket(bucket: string): Promise<string[]>;
  /** How many are in `bucket` (with `before`: whose ids sort before it), without reading them. */
  count(bucket: string, before?: string): Promise<number>;
  /** Every id whose `flag` field is set. */
  flagged(flag: string): Promise<string[]>;
  /** Up to `limit` of the oldest ids that sort before `bound`. */
  oldest(bound: string, limit: number): Promise<string[]>;
}

/** The bucket of a record, by its spec. */
export function bucketOf<T>(spec: CollectionSpec<T>, record: T): string {
  const value = (record as Record<string, unknown>)[spec.bucket.field];
  const { set, unset } = spec.bucket;
  if (set === undefined || unset === undefined) return String(value);
  return value === undefined || value === null ? unset : set;
}
