/**
 * @module The service's own SQL connections: a SQLite file (the daemon's) or a PostgreSQL database
 * (a fleet's), opened by the service itself, so its tables are its own and nothing reads another
 * library's layout. One `query` for both dialects: `?` placeholders, numbered for PostgreSQL.
 */
import { chmodSync, closeSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import type { Pool, PoolClient } from 'pg';
import { StorageError } from '../../contract/problems';
import { loadOptional } from '../util/optional-package';
import { type NodeSqlite, inOwnTransaction, loadNodeSqlite, openNodeSqlite } from './node-sqlite';

export interface SqlDatabase {
  readonly dialect: 'sqlite' | 'postgres';
  /** PostgreSQL's connection string, for the fleet's connections of its own (its listener, its transactions). */
  readonly connectionString?: string;
  /** Runs one statement; failures are `StorageError`s. */
  query<T>(text: string, params?: unknown[]): Promise<T[]>;
  /**
   * Runs `work` on a connection of its own, in one transaction: committed if it resolves, rolled
   * back if it throws. SQLite holds its write lock throughout. For start-up work (migrations).
   */
  transaction<T>(work: (query: SqlQuery) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export type SqlQuery = SqlDatabase['query'];

function fail(operation: string, error: unknown): never {
  throw StorageError.of(operation, error);
}

/**
 * A SQLite file, durable across a crash (WAL journal, every commit fsynced before it is answered:
 * `FULL` here, which node-sqlite.ts turns into the same sync off the event loop), its journal
 * kept small, waiting up to 5 s on a lock before failing. Its files are private (0600), also in
 * a folder that already existed. The driver is Node's own `node:sqlite`
 * where the runtime has it (22.13 and later), else `@photostructure/sqlite`, the same API with
 * prebuilt binaries in its package (Node 20: nothing to compile), which is then needed beside
 * this one. Both are synchronous: a statement costs microseconds rather than a thread-pool round trip.
 */
export async function openSqlite(dataDir: string, file: string): Promise<SqlDatabase> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  makePrivate(dataDir, file);
  const driver =
    loadNodeSqlite() ??
    (await loadOptional(
      () => import('@photostructure/sqlite') as Promise<NodeSqlite>,
      '@photostructure/sqlite',
      `The SQLite store on Node.js ${process.versions.node} (22.13 and later have SQLite built in)`,
    ));
  const connection = openNodeSqlite(driver, file, PRAGMAS, BUSY_MS);
  return {
    dialect: 'sqlite',
    query: (text, params) => connection.query(text, params),
    transaction: (work) => inOwnTransaction(driver, file, PRAGMAS, work),
    close: () => connection.close(),
  };
}

/** How long a write waits for another process's write lock before it fails. */
const BUSY_MS = 5000;

const PRAGMAS = [
  `PRAGMA busy_timeout=${BUSY_MS}`,
  'PRAGMA journal_mode=WAL',
  'PRAGMA synchronous=FULL',
  // The WAL is checkpointed every 100 pages (not 1000) and cut back to 1 MiB after, so a small
  // disk is not filled by the journal alone.
  'PRAGMA wal_autocheckpoint=100',
  'PRAGMA journal_size_limit=1048576',
];

/**
 * Creates the database file 0600 before SQLite opens it (SQLite gives its -wal and -shm files
 * the database file's mode), and takes group and world access from files left by older versions.
 */
function makePrivate(dataDir: string, file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const name of readdirSync(dataDir)) if (name.startsWith('headless.sqlite')) chmodSync(`${dataDir}/${name}`, 0o600);
}

/** A connection string without its password, for messages. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    for (const key of [...parsed.searchParams.keys()]) if (/pass|secret|token/i.test(key)) parsed.searchParams.set(key, '***');
    return parsed.href;
  } catch {
    return 'the database URL (not shown: it does not parse)';
  }
}

/** PostgreSQL errors of instances starting together that race on `CREATE … IF NOT EXISTS`: the loser finds it made when it tries again. */
const CREATE_RACES = ['23505', '42P07', '42710'];

/** A PostgreSQL database, which several instances may share. Connects once, so a wrong URL fails here, saying which. */
export async function openPostgres(url: string): Promise<SqlDatabase> {
  const { default: pg } = await loadOptional(() => import('pg'), 'pg', 'A PostgreSQL store');
  const pool = new pg.Pool({ connectionString: url });
  // An idle connection the server drops must not crash the service; the next query reports it.
  pool.on('error', () => undefined);
  try {
    (await pool.connect()).release();
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new StorageError(`cannot open ${redact(url)}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const run = async <T>(text: string, params: unknown[]) => (await pool.query(numbered(text), params)).rows as T[];
  return {
    dialect: 'postgres',
    connectionString: url,
    async query<T>(text: string, params: unknown[] = []) {
      try {
        return await run<T>(text, params);
      } catch (error) {
        if (!(/^CREATE /.test(text) && CREATE_RACES.includes((error as { code?: string }).code ?? ''))) fail('query', error);
        try {
          return await run<T>(text, params);
        } catch (again) {
          fail('query', again);
        }
      }
    },
    transaction: (work) => pgTransaction(pool, work),
    close: () => pool.end(),
  };
}

/** `?` placeholders as PostgreSQL's `$1`, `$2`… */
function numbered(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** `work` on a connection of the pool's, between BEGIN and COMMIT (ROLLBACK if it throws); a connection that failed is dropped. */
async function pgTransaction<T>(pool: Pool, work: (query: SqlQuery) => Promise<T>): Promise<T> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    fail('connect', error);
  }
  const query = async <R>(text: string, params: unknown[] = []) => {
    try {
      return (await client.query(numbered(text), params)).rows as R[];
    } catch (error) {
      fail('query', error);
    }
  };
  let failed = false;
  try {
    await query('BEGIN');
    const result = await work(query);
    await query('COMMIT');
    return result;
  } catch (error) {
    failed = true;
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(failed);
  }
}
