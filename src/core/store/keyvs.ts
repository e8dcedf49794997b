import { chmodSync, closeSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Keyv } from 'keyv';
import { StorageError } from '../../contract/problems';

/** The Keyv stores the service ships: in memory (the library's default), SQLite (the daemon's), PostgreSQL (a fleet's). */

/** The embedded default: in memory, gone when the process ends. */
export function createMemoryKeyv(): Keyv {
  return new Keyv({ namespace: 'hrw', throwOnErrors: true });
}

/**
 * The daemon's store: a SQLite file under `dataDir`, durable across a crash (WAL journal,
 * `synchronous=FULL`: every commit is fsynced), its journal kept small, waiting up to 5 s on a
 * lock before failing. Its files are private (0600), also in a folder that already existed.
 */
export async function createSqliteKeyv(dataDir: string): Promise<Keyv> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const { KeyvSqlite } = await import('@keyv/sqlite');
  const file = join(dataDir, 'headless.sqlite');
  makePrivate(dataDir, file);
  const sqlite = new KeyvSqlite({ uri: `sqlite://${file}`, table: 'headless', busyTimeout: 5000 });
  try {
    await sqlite.query('PRAGMA journal_mode=WAL');
    await sqlite.query('PRAGMA synchronous=FULL');
    // The WAL is checkpointed every 100 pages (not 1000) and cut back to 1 MiB after, so a small
    // disk is not filled by the journal alone.
    await sqlite.query('PRAGMA wal_autocheckpoint=100');
    await sqlite.query('PRAGMA journal_size_limit=1048576');
  } catch (error) {
    await sqlite.close().catch(() => undefined);
    throw new StorageError(`cannot open ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return new Keyv({ store: sqlite, namespace: 'hrw', throwOnErrors: true });
}

/**
 * Creates the database file 0600 before SQLite opens it (SQLite gives its -wal and -shm files
 * the database file's mode), and takes group and world access from files left by older versions.
 */
function makePrivate(dataDir: string, file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const name of readdirSync(dataDir)) if (name.startsWith('headless.sqlite')) chmodSync(join(dataDir, name), 0o600);
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

/**
 * A store in PostgreSQL, which several instances may share (docs/deployment.md: Running several
 * instances). Connects once, so a wrong URL fails here, saying which.
 */
export async function createPostgresKeyv(url: string): Promise<Keyv> {
  const [{ KeyvPostgres }, { default: pg }] = await Promise.all([import('@keyv/postgres'), import('pg')]);
  const pool = new pg.Pool({ connectionString: url });
  // An idle connection the server drops must not crash the service; the next query reports it.
  pool.on('error', () => undefined);
  try {
    // Made here, one instance at a time: instances starting together would race on it otherwise.
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT pg_advisory_xact_lock(hashtext('headless-run-webhook:schema'))");
      await client.query('CREATE TABLE IF NOT EXISTS public.headless (key VARCHAR(255) PRIMARY KEY, value TEXT)');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw new StorageError(`cannot open ${redact(url)}: ${error instanceof Error ? error.message : String(error)}`);
  }
  // @keyv/postgres keeps one pool per process, which the next store with another URL replaces
  // and any store's disconnect ends: each store has its own.
  class OwnPool extends KeyvPostgres {
    override async connect() {
      return async (text: string, values?: unknown[]) => (await pool.query(text, values)).rows;
    }
    override async disconnect() {
      await pool.end();
    }
  }
  return new Keyv({ store: new OwnPool({ uri: url, table: 'headless' }), namespace: 'hrw', throwOnErrors: true });
}
