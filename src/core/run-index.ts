import { OrderedIndex, type Page } from './ordered-index';
import type { HeadlessStore, SqlAccess } from './store';
import type { RunStatus, StoredRun } from './types';

/**
 * Which runs each workspace has, by status, newest first: what list pages and crash recovery
 * read. In a SQL store (SQLite, PostgreSQL) it is a table with its own indexes beside the
 * key-value table, so start-up reads only the running runs and memory does not grow with the
 * stored ones; in any other Keyv store it is kept in memory, built by one scan at start-up.
 */
export interface RunIndex {
  /** Prepares the index (creates and, the first time, fills the table; or scans into memory). */
  load(): Promise<void>;
  add(run: Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>): Promise<void>;
  move(run: Pick<StoredRun, 'workspaceId' | 'taskId'>, from: RunStatus, to: RunStatus): Promise<void>;
  delete(run: Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>): Promise<void>;
  /** Newest first, ids strictly older than `cursor`. */
  page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<Page>;
  /** Up to `limit` of the oldest ids that sort before `bound`. */
  oldest(bound: string, limit: number): Promise<string[]>;
  /** The ids of the runs recorded `running`. */
  running(): Promise<string[]>;
}

export function createRunIndex(store: HeadlessStore): RunIndex {
  return store.sql ? new SqlRunIndex(store, store.sql) : new MemoryRunIndex(store);
}

class MemoryRunIndex implements RunIndex {
  private readonly index = new OrderedIndex<RunStatus>();
  private readonly runningIds = new Set<string>();

  constructor(private readonly store: HeadlessStore) {}

  async load(): Promise<void> {
    for await (const [, run] of this.store.scan<StoredRun>('run:')) await this.add(run);
  }

  async add(run: Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>): Promise<void> {
    this.index.add(run.workspaceId, run.taskId, run.status);
    if (run.status === 'running') this.runningIds.add(run.taskId);
  }

  async move(run: Pick<StoredRun, 'workspaceId' | 'taskId'>, from: RunStatus, to: RunStatus): Promise<void> {
    this.index.move(run.workspaceId, run.taskId, from, to);
    if (to !== 'running') this.runningIds.delete(run.taskId);
  }

  async delete(run: Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>): Promise<void> {
    this.index.delete(run.workspaceId, run.taskId, run.status);
    this.runningIds.delete(run.taskId);
  }

  async page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<Page> {
    return this.index.page(workspaceId, status, limit, cursor);
  }

  async oldest(bound: string, limit: number): Promise<string[]> {
    return this.index.oldest(bound, limit).map((e) => e.id);
  }

  async running(): Promise<string[]> {
    return [...this.runningIds];
  }
}

const TABLE = 'headless_runs';
/** Set once the table holds every stored run (filled from the records the first time). */
const FILLED_KEY = 'meta:run-index';
const FILL_BATCH = 500;

class SqlRunIndex implements RunIndex {
  private readonly pg: boolean;

  constructor(
    private readonly store: HeadlessStore,
    private readonly sql: SqlAccess,
  ) {
    this.pg = sql.dialect === 'postgres';
  }

  /** `?` placeholders, numbered for PostgreSQL. */
  private q<T>(text: string, params: unknown[] = []): Promise<T[]> {
    let n = 0;
    return this.sql.query<T>(this.pg ? text.replace(/\?/g, () => `$${++n}`) : text, params);
  }

  async load(): Promise<void> {
    // Ids compare byte-wise (PostgreSQL's default collation might not), so pages follow creation order.
    const id = this.pg ? 'TEXT COLLATE "C"' : 'TEXT';
    await this.q(`CREATE TABLE IF NOT EXISTS ${TABLE} (task_id ${id} PRIMARY KEY, workspace_id ${id} NOT NULL, status TEXT NOT NULL)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${TABLE}_workspace ON ${TABLE} (workspace_id, task_id)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${TABLE}_workspace_status ON ${TABLE} (workspace_id, status, task_id)`);
    await this.q(`CREATE INDEX IF NOT EXISTS ${TABLE}_status ON ${TABLE} (status)`);
    if (await this.store.get(FILLED_KEY)) return;
    // A store written before the table existed: one pass over its records, then never again.
    let batch: Array<Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>> = [];
    for await (const [, run] of this.store.scan<StoredRun>('run:')) {
      batch.push(run);
      if (batch.length >= FILL_BATCH) batch = await this.insert(batch);
    }
    await this.insert(batch);
    await this.store.set(FILLED_KEY, { version: 1 });
  }

  private async insert(runs: Array<Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>>): Promise<[]> {
    if (runs.length === 0) return [];
    const values = runs.map(() => '(?, ?, ?)').join(', ');
    await this.q(
      `INSERT INTO ${TABLE} (task_id, workspace_id, status) VALUES ${values} ON CONFLICT (task_id) DO UPDATE SET status = excluded.status`,
      runs.flatMap((r) => [r.taskId, r.workspaceId, r.status]),
    );
    return [];
  }

  async add(run: Pick<StoredRun, 'workspaceId' | 'taskId' | 'status'>): Promise<void> {
    await this.insert([run]);
  }

  async move(run: Pick<StoredRun, 'workspaceId' | 'taskId'>, _from: RunStatus, to: RunStatus): Promise<void> {
    await this.q(`UPDATE ${TABLE} SET status = ? WHERE task_id = ?`, [to, run.taskId]);
  }

  async delete(run: Pick<StoredRun, 'taskId'>): Promise<void> {
    await this.q(`DELETE FROM ${TABLE} WHERE task_id = ?`, [run.taskId]);
  }

  async page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<Page> {
    const where = ['workspace_id = ?', ...(status ? ['status = ?'] : []), ...(cursor ? ['task_id < ?'] : [])].join(' AND ');
    const params = [workspaceId, ...(status ? [status] : []), ...(cursor ? [cursor] : []), limit + 1];
    const rows = await this.q<{ task_id: string }>(`SELECT task_id FROM ${TABLE} WHERE ${where} ORDER BY task_id DESC LIMIT ?`, params);
    const ids = rows.slice(0, limit).map((r) => r.task_id);
    return { ids, next: rows.length > limit ? ids[ids.length - 1]! : null };
  }

  async oldest(bound: string, limit: number): Promise<string[]> {
    const rows = await this.q<{ task_id: string }>(`SELECT task_id FROM ${TABLE} WHERE task_id < ? ORDER BY task_id LIMIT ?`, [bound, limit]);
    return rows.map((r) => r.task_id);
  }

  async running(): Promise<string[]> {
    return (await this.q<{ task_id: string }>(`SELECT task_id FROM ${TABLE} WHERE status = 'running'`)).map((r) => r.task_id);
  }
}
