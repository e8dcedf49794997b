/**
 * @module A SQLite connection through Node's own `node:sqlite` (22.13 and later), whose calls are
 * synchronous: a statement costs microseconds, but a commit's fsync holds the event loop. So
 * writes are committed in groups: the first statement while none is open begins a transaction,
 * every statement of the same turn of the event loop joins it, and one COMMIT (one fsync) ends it
 * before the next turn. Each statement's promise settles only once its group is durable, reads
 * included, so nothing is answered from a write that a failed commit takes back.
 */
import { StorageError } from '../../contract/problems';

/** What this module uses of `node:sqlite` (not in Node 20's types). */
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

interface Waiting {
  settle(error?: unknown): void;
}

function storageError(operation: string, error: unknown): StorageError {
  const reason = error instanceof Error ? error.message : String(error);
  return new StorageError(`store ${operation} failed: ${reason}`, { cause: error });
}

/** Opens `file`, sets `pragmas` outside any transaction, and answers statements in committed groups. */
export function openNodeSqlite(sqlite: NodeSqlite, file: string, pragmas: readonly string[]): GroupedConnection {
  let db: Connection;
  try {
    db = new sqlite.DatabaseSync(file);
    for (const pragma of pragmas) db.exec(pragma);
  } catch (error) {
    throw storageError(`open of ${file}`, error);
  }
  const prepared = new Map<string, ReturnType<Connection['prepare']>>();
  const statement = (text: string) => {
    let found = prepared.get(text);
    if (!found) {
      if (prepared.size >= PREPARED_LIMIT) prepared.clear();
      found = db.prepare(text);
      prepared.set(text, found);
    }
    return found;
  };
  let group: Waiting[] | undefined;
  /** Ends the open group: COMMIT, then each waiting statement settles; a failed commit fails them all. */
  const commit = () => {
    const waiting = group ?? [];
    group = undefined;
    let error: unknown;
    try {
      db.exec('COMMIT');
    } catch (commitError) {
      error = commitError;
      try {
        db.exec('ROLLBACK');
      } catch {
        // SQLite already rolled it back (a full disk, an I/O error).
      }
    }
    for (const one of waiting) one.settle(error === undefined ? undefined : storageError('commit', error));
  };
  return {
    query<T>(text: string, params: unknown[] = []) {
      if (!group) {
        try {
          db.exec('BEGIN');
        } catch (error) {
          return Promise.reject(storageError('query', error));
        }
        const opened: Waiting[] = [];
        group = opened;
        setImmediate(() => group === opened && commit());
      }
      const waiting = group;
      let rows: T[];
      try {
        rows = statement(text).all(...params.map(bindable)) as T[];
      } catch (error) {
        // The statement alone failed; what the group wrote before it is committed now, or, if SQLite
        // took the whole transaction back, fails with it.
        const failed = storageError('query', error);
        if (group === waiting) commit();
        return Promise.reject(failed);
      }
      return new Promise<T[]>((resolve, reject) => waiting.push({ settle: (error) => (error ? reject(error) : resolve(rows)) }));
    },
    async close() {
      if (group) commit();
      prepared.clear();
      db.close();
    },
  };
}

/** What `sqlite3` binds by itself and `node:sqlite` refuses: `undefined` as NULL, booleans as 0 and 1. */
function bindable(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}
