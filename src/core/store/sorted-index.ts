import { OrderedIndex, type Page } from './memory-index';
import type { HeadlessStore, SqlAccess } from './keyv-store';

/**
 * Ids per workspace, each in one bucket (a run's status; an Inbox item's read state), newest
 * first: what list pages, crash recovery and retention read. In a SQL store (SQLite,
 * PostgreSQL) it is a table with its own indexes beside the key-value table, so start-up reads
 * nothing but what it needs and memory does not grow with what is stored; in any other Keyv
 * store it is kept in memory, built by one scan at start-up.
 */
export interface SortedIndex<B extends string> {
  /** Prepares the index (creates and, the first time, fills the table; or scans into memory). */
  load(): Promise<void>;
  add(entry: IndexEntry<B>): Promise<void>;
  /** Puts an id in another bucket. */
  move(entry: IndexEntry<B>, from: B): Promise<void>;
  delete(entry: IndexEntry<B>): Promise<void>;
  /** Newest first, ids strictly older than `cursor`. */
  page(group: string, bucket: B | undefined, limit: number, cursor?: string): Promise<Page>;
  /** Up to `limit` of the oldest ids that sort before `bound`, with their group and bucket. */
  oldest(bound: string, limit: number): Promise<Array<IndexEntry<B>>>;
  /** Every entry in `bucket` (the runs still `running`, the webhook deliveries still pending). */
  inBucket(bucket: B): Promise<Array<IndexEntry<B>>>;
}

export interface IndexEntry<B extends string> {
  group: string;
  id: string;
  bucket: B;
}

export interface IndexSpec<T, B extends string> {
  /** The SQL table. */
  table: string;
  /** The key prefix of the stored values, to fill the index from. */
  prefix: string;
  entry(value: T): IndexEntry<B>;
}

export function createSortedIndex<T, B extends string>(store: HeadlessStore, spec: IndexSpec<T, B>): SortedIndex<B> {
  return store.sql ? new SqlIndex(store, store.sql, spec) : new MemoryIndex(store, spec);
}

class MemoryIndex<T, B extends string> implements SortedIndex<B> {
  private readonly index = new OrderedIndex<B>();

  constructor(
    private readonly store: HeadlessStore,
    private readonly spec: IndexSpec<T, B>,
  ) {}

  async load(): Promise<void> {
    for await (const [, value] of this.store.scan<T>(this.spec.prefix)) await this.add(this.spec.entry(value));
  }

  async add(e: IndexEntry<B>): Promise<void> {
    this.index.add(e.group, e.id, e.bucket);
  }

  async move(e: IndexEntry<B>, from: B): Promise<void> {
    this.index.move(e.group, e.id, from, e.bucket);
  }

  async delete(e: IndexEntry<B>): Promise<void> {
    this.index.delete(e.group, e.id, e.bucket);
  }

  async page(group: string, bucket: B | undefined, limit: number, cursor?: string): Promise<Page> {
    return this.index.page(group, bucket, limit, cursor);
  }

  async oldest(bound: string, limit: number): Promise<Array<IndexEntry<B>>> {
    return this.index.oldest(bound, limit);
  }

  async inBucket(bucket: B): Promise<Array<IndexEntry<B>>> {
    return this.index.inBucket(bucket);
  }
}

const FILL_BATCH = 500;

class SqlIndex<T, B extends string> implements SortedIndex<B> {
  private readonly pg: boolean;
  private readonly table: string;

  constructor(
    private readonly store: HeadlessStore,
    private readonly sql: SqlAccess,
    private readonly spec: IndexSpec<T, B>,
  ) {
    this.pg = sql.dialect === 'postgres';
    this.table = spec.table;
  }

  /** `?` placeholders, numbered for PostgreSQL. */
  private q<R>(text: string, params: unknown[] = []): Promise<R[]> {
    let n = 0;
    return this.sql.query<R>(this.pg ? text.replace(/\?/g, () => `$${++n}`) : text, params);
  }

  async load(): Promise<void> {
    const t = this.table;
    // Ids compare byte-wise (PostgreSQL's default collation might not), so pages follow creation order.
    const text = this.pg ? 'TEXT COLLATE "C"' : 'TEXT';
    await this.q(`CREATE TABLE IF NOT EXISTS ${t} (id ${text} PRIMARY KEY, workspace_id ${text} NOT NULL, bucket TEXT NOT NULL)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${t}_workspace ON ${t} (workspace_id, id)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${t}_workspace_bucket ON ${t} (workspace_id, bucket, id)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${t}_bucket ON ${t} (bucket)`);
    const filled = `meta:index:${t}`;
    if (await this.store.get(filled)) return;
    // A store written before the table existed: one pass over its values, then never again.
    let batch: Array<IndexEntry<B>> = [];
    for await (const [, value] of this.store.scan<T>(this.spec.prefix)) {
      batch.push(this.spec.entry(value));
      if (batch.length >= FILL_BATCH) batch = await this.insert(batch);
    }
    await this.insert(batch);
    await this.store.set(filled, { version: 1 });
  }

  private async insert(entries: Array<IndexEntry<B>>): Promise<[]> {
    if (entries.length === 0) return [];
    await this.q(
      `INSERT INTO ${this.table} (id, workspace_id, bucket) VALUES ${entries.map(() => '(?, ?, ?)').join(', ')} ON CONFLICT (id) DO UPDATE SET bucket = excluded.bucket`,
      entries.flatMap((e) => [e.id, e.group, e.bucket]),
    );
    return [];
  }

  async add(e: IndexEntry<B>): Promise<void> {
    await this.insert([e]);
  }

  async move(e: IndexEntry<B>): Promise<void> {
    await this.q(`UPDATE ${this.table} SET bucket = ? WHERE id = ?`, [e.bucket, e.id]);
  }

  async delete(e: IndexEntry<B>): Promise<void> {
    await this.q(`DELETE FROM ${this.table} WHERE id = ?`, [e.id]);
  }

  async page(group: string, bucket: B | undefined, limit: number, cursor?: string): Promise<Page> {
    const where = ['workspace_id = ?', ...(bucket ? ['bucket = ?'] : []), ...(cursor ? ['id < ?'] : [])].join(' AND ');
    const params = [group, ...(bucket ? [bucket] : []), ...(cursor ? [cursor] : []), limit + 1];
    const rows = await this.q<{ id: string }>(`SELECT id FROM ${this.table} WHERE ${where} ORDER BY id DESC LIMIT ?`, params);
    const ids = rows.slice(0, limit).map((r) => r.id);
    return { ids, next: rows.length > limit ? ids[ids.length - 1]! : null };
  }

  async oldest(bound: string, limit: number): Promise<Array<IndexEntry<B>>> {
    const rows = await this.q<{ id: string; workspace_id: string; bucket: B }>(`SELECT id, workspace_id, bucket FROM ${this.table} WHERE id < ? ORDER BY id LIMIT ?`, [bound, limit]);
    return rows.map((r) => ({ group: r.workspace_id, id: r.id, bucket: r.bucket }));
  }

  async inBucket(bucket: B): Promise<Array<IndexEntry<B>>> {
    const rows = await this.q<{ id: string; workspace_id: string }>(`SELECT id, workspace_id FROM ${this.table} WHERE bucket = ?`, [bucket]);
    return rows.map((r) => ({ group: r.workspace_id, id: r.id, bucket }));
  }
}
