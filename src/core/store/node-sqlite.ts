/**
 * @module A SQLite connection through Node's own `node:sqlite` (22.13 and later) or its drop-in
 * `@photostructure/sqlite` (Node 20), whose calls are
 * synchronous: a statement costs microseconds, but a commit's fsync holds the event loop. So
 * writes are committed in groups: the first statement while none is open begins a transaction,
 * every statement of the same turn of the event loop joins it, and one COMMIT (one fsync) ends it
 * before the next turn. Each statement's promise settles only once its group is durable, reads
 * included, so nothing is answered from a write that a failed commit takes back. In WAL mode the
 * commit's fsync is taken out of COMMIT (`synchronous=NORMAL`) and done on the thread pool
 * (wal-sync.ts) before the group settles: as durable as `FULL`, without holding the event loop
 * for it (some 15 ms a commit on a busy virtual disk); while it runs, the open group takes the
 * next turns' statements too. A lock held by
 * another process is waited for with timers, not with SQLite's busy wait, which would hold the
 * event loop.
 */
import { StorageError } from '../../contract/problems';
import { WalSync } from './wal-sync';

/** What this module uses of `node:sqlite`'s API (not in Node 20's types). */
export interface NodeSqlite {
  DatabaseSync: new (
    file: string,
  ) => {
    exec(text: string): void;
    prepare(text: string): { all(...params: unknown[]): unknown[] };
    close(): void;
  };
}

type Connection = InstanceType<NodeSqlite['DatabaseSync']>;

/** The connection as sql-database.ts's `SqlDatabase` takes it. */
export interface GroupedConnection {
  query<T>(text: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/** `node:sqlite` where the runtime has it unflagged, without the experimental-feature warning Node 22 prints as it loads. */
export function loadNodeSqlite(): NodeSqlite | undefined {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: never[]) => {
    if (!String(warning).includes('SQLite')) emit.call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return process.getBuiltinModule('node:sqlite') as NodeSqlite | undefined;
  } catch {
    return undefined;
  } finally {
    process.emitWarning = emit;
  }
}

/** The most statements kept prepared; the service's are a few dozen texts, reused. */
const PREPARED_LIMIT = 500;
/** How often a write waiting for another process's write lock tries again (off the event loop). */
const BUSY_RETRY_MS = 20;

interface Waiting {
  /** `rolledBack`: the group's COMMIT failed and SQLite took it back (a full disk). */
  settle(error?: unknown, rolledBack?: boolean): void;
}

interface Queued {
  text: string;
  params: unknown[];
  resolve(rows: unknown[]): void;
  reject(error: unknown): void;
}

/** SQLITE_BUSY: another connection holds the write lock. */
const isBusy = (error: unknown) => (error as { errcode?: number }).errcode === 5;

/**
 * Opens `file`, sets `pragmas` outside any transaction, and answers statements in committed groups.
 * A group takes the write lock as it begins; while another process holds it, writes wait (retried
 * every BUSY_RETRY_MS, never blocking the event loop), reads are answered at once, and after
 * `busyMs` the waiting writes fail.
 */
export function openNodeSqlite(sqlite: NodeSqlite, file: string, pragmas: readonly string[], busyMs: number): GroupedConnection {
  let db: Connection;
  try {
    db = new sqlite.DatabaseSync(file);
    for (const pragma of pragmas) db.exec(pragma);
    // Waits for a lock are ours (below), not SQLite's, which would hold the event loop.
    db.exec('PRAGMA busy_timeout=0');
    if (!isWal(db)) return new GroupedSqlite(db, busyMs);
    // The WAL's fsync is ours too, after COMMIT and before any answer (wal-sync.ts).
    db.exec('PRAGMA synchronous=NORMAL');
  } catch (error) {
    throw StorageError.of(`open of ${file}`, error);
  }
  return new GroupedSqlite(db, busyMs, new WalSync(file));
}

/**
 * Runs `work` on a connection of its own to `file`, in one transaction that holds the write lock
 * (`BEGIN IMMEDIATE`, waiting up to the pragmas' busy_timeout for another process's), committed
 * if `work` resolves, rolled back if it throws. For start-up work whose statements must commit
 * together (migrations), which the grouped connection's commits cannot promise.
 */
export async function inOwnTransaction<T>(
  sqlite: NodeSqlite,
  file: string,
  pragmas: readonly string[],
  work: (query: GroupedConnection['query']) => Promise<T>,
): Promise<T> {
  let db: Connection | undefined;
  try {
    db = new sqlite.DatabaseSync(file);
    for (const pragma of pragmas) db.exec(pragma);
    db.exec('BEGIN IMMEDIATE');
  } catch (error) {
    db?.close();
    throw StorageError.of(`open of ${file}`, error);
  }
  const open = db;
  const query = async <R>(text: string, params: unknown[] = []) => {
    try {
      return open.prepare(text).all(...params.map(bindable)) as R[];
    } catch (error) {
      throw StorageError.of('query', error);
    }
  };
  try {
    const result = await work(query);
    open.exec('COMMIT');
    return result;
  } catch (error) {
    try {
      open.exec('ROLLBACK');
    } catch {
      // Nothing to take back: SQLite already did, or the COMMIT went through before failing.
    }
    throw error instanceof StorageError ? error : StorageError.of('commit', error);
  } finally {
    open.close();
  }
}

const isWal = (db: Connection) => (db.prepare('PRAGMA journal_mode').all()[0] as { journal_mode?: string } | undefined)?.journal_mode === 'wal';

class GroupedSqlite implements GroupedConnection {
  private readonly prepared = new Map<string, ReturnType<Connection['prepare']>>();
  /** The open transaction's statements, settled at its COMMIT. */
  private group: Waiting[] | undefined;
  /** Writes waiting for the write lock, and since when. */
  private queue: { statements: Queued[]; since: number } | undefined;

  constructor(
    private readonly db: Connection,
    private readonly busyMs: number,
    /** In WAL mode: the fsync a commit waits for before it settles. */
    private readonly wal?: WalSync,
  ) {}

  query<T>(text: string, params: unknown[] = []): Promise<T[]> {
    return this.run<T>(text, params, false);
  }

  /** `again`: a read whose group was taken back, read once more. */
  private run<T>(text: string, params: unknown[], again: boolean): Promise<T[]> {
    if (this.queue) {
      // Another process holds the write lock: a read is answered from what is committed.
      if (/^\s*SELECT\b/i.test(text)) return this.now<T>(text, params);
      return new Promise<T[]>((resolve, reject) => this.queue?.statements.push({ text, params, resolve: resolve as Queued['resolve'], reject }));
    }
    if (!this.group) {
      try {
        this.begin();
      } catch (error) {
        if (!isBusy(error)) return Promise.reject(StorageError.of('query', error));
        this.queue = { statements: [], since: Date.now() };
        setTimeout(() => this.retry(), BUSY_RETRY_MS);
        return this.run<T>(text, params, again);
      }
    }
    return this.inGroup<T>(text, params, again);
  }

  async close(): Promise<void> {
    for (const queued of this.queue?.statements ?? []) queued.reject(StorageError.of('query', new Error('the store is closing')));
    this.queue = undefined;
    if (this.group) this.commit();
    await this.wal?.close();
    this.prepared.clear();
    this.db.close();
  }

  private begin(): void {
    this.db.exec('BEGIN IMMEDIATE');
    const opened: Waiting[] = [];
    this.group = opened;
    setImmediate(() => this.endWhenSynced(opened));
  }

  /**
   * Commits the group `opened` once no fsync runs: while one does, the group stays open and takes
   * the next turns' statements too, so a slow disk makes fewer, larger commits (fewer WAL frames,
   * fewer checkpoints) rather than a queue of small ones.
   */
  private endWhenSynced(opened: Waiting[]): void {
    if (this.group !== opened) return;
    if (this.wal) this.wal.whenIdle(() => this.group === opened && this.commit());
    else this.commit();
  }

  /** Tries the waiting writes again: in one group once the lock is free, failed once `busyMs` is over. */
  private retry(): void {
    const queue = this.queue;
    if (!queue) return;
    try {
      this.begin();
    } catch (error) {
      if (isBusy(error) && Date.now() - queue.since < this.busyMs) {
        setTimeout(() => this.retry(), BUSY_RETRY_MS);
        return;
      }
      this.queue = undefined;
      for (const queued of queue.statements) queued.reject(StorageError.of('query', error));
      return;
    }
    this.queue = undefined;
    for (const queued of queue.statements) this.query(queued.text, queued.params).then(queued.resolve, queued.reject);
  }

  /**
   * Runs a statement in the open group; it answers once the group is committed. A read whose group
   * was taken back (a full disk failed its COMMIT) is read again, once, from what is committed:
   * reads go on while writes are refused.
   */
  private inGroup<T>(text: string, params: unknown[], again = false): Promise<T[]> {
    const waiting = this.group;
    if (!waiting) return this.run<T>(text, params, again);
    let rows: T[];
    try {
      rows = this.statement(text).all(...params.map(bindable)) as T[];
    } catch (error) {
      // The statement alone failed; what the group wrote before it is committed now, or, if SQLite
      // took the whole transaction back, fails with it.
      if (this.group === waiting) this.commit();
      return Promise.reject(StorageError.of('query', error));
    }
    const read = !again && /^\s*SELECT\b/i.test(text);
    return new Promise<T[]>((resolve, reject) =>
      waiting.push({
        settle: (error, rolledBack) => {
          if (!error) return resolve(rows);
          if (!read || !rolledBack) return reject(error);
          this.run<T>(text, params, true).then(resolve, reject);
        },
      }),
    );
  }

  /** A statement outside any transaction, answered once what it may have read is durable. */
  private now<T>(text: string, params: unknown[]): Promise<T[]> {
    let rows: T[];
    try {
      rows = this.statement(text).all(...params.map(bindable)) as T[];
    } catch (error) {
      return Promise.reject(StorageError.of('query', error));
    }
    if (!this.wal) return Promise.resolve(rows);
    return this.wal.durable().then(
      () => rows,
      (error) => Promise.reject(StorageError.of('commit', error)),
    );
  }

  /**
   * Ends the open group: COMMIT, then (in WAL mode) the WAL's fsync, then each waiting statement
   * settles. A failed commit fails them all; so does a failed fsync, though what the commit wrote
   * stays readable, as a PostgreSQL commit whose answer is lost may still have happened.
   */
  private commit(): void {
    const waiting = this.group ?? [];
    this.group = undefined;
    const settle = (error?: unknown, rolledBack = false) => {
      for (const one of waiting) one.settle(error === undefined ? undefined : StorageError.of('commit', error), rolledBack);
    };
    try {
      this.db.exec('COMMIT');
    } catch (commitError) {
      try {
        this.db.exec('ROLLBACK');
      } catch {
        // SQLite already rolled it back (a full disk, an I/O error).
      }
      settle(commitError, true);
      return;
    }
    if (this.wal) this.wal.afterCommit(settle);
    else settle();
  }

  private statement(text: string) {
    let found = this.prepared.get(text);
    if (!found) {
      if (this.prepared.size >= PREPARED_LIMIT) this.prepared.clear();
      found = this.db.prepare(text);
      this.prepared.set(text, found);
    }
    return found;
  }
}

/** What the service binds and `node:sqlite` refuses: `undefined` as NULL, booleans as 0 and 1. */
function bindable(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}
