import type { Page } from './memory-index';

/**
 * Records of one kind (runs, Inbox items) under one key prefix, with the lookups that lists,
 * crash recovery, the outbox and retention need. A state change is ONE write, of the record:
 * every lookup is derived from the stored records. In SQLite and PostgreSQL the lookups are
 * expression indexes over the record's JSON in the key-value table itself, so the database keeps
 * them in the same statement as the write; in any other Keyv store they are kept in memory,
 * rebuilt from the records at every start and updated as each write succeeds.
 */
export interface CollectionSpec<T> {
  /** The key prefix, e.g. `run:`; ids follow it and sort in creation order. */
  prefix: string;
  /** The field lists are grouped by (a workspace id). */
  group: keyof T & string;
  /**
   * What sorts a record into a bucket: a field's value (a status), or, with `set`/`unset`, whether
   * the field is set (an Inbox item's `readAt`: `read` or `unread`).
   */
  bucket: { field: keyof T & string; set?: string; unset?: string };
  /** Fields whose presence is looked up (a pending delivery's due time). */
  flags?: Array<keyof T & string>;
}

/** The lookups, answered from the stored records. */
export interface RecordLookups {
  /** Prepares them: creates the SQL indexes, or reads every record into memory. Start-up only. */
  load(): Promise<void>;
  /** Newest first, ids strictly older than `cursor`. */
  page(group: string, bucket: string | undefined, limit: number, cursor?: string): Promise<Page>;
  /** Every id in `bucket`. */
  inBucket(bucket: string): Promise<string[]>;
  /** Every id whose `flag` field is set. */
  flagged(flag: string): Promise<string[]>;
  /** Up to `limit` of the oldest ids that sort before `bound`. */
  oldest(bound: string, limit: number): Promise<string[]>;
}
