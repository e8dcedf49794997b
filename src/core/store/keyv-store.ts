import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Keyv } from 'keyv';
import { StorageError } from '../../contract/problems';

/**
 * The persistence the service needs, over any Keyv instance. Keys are `kind:id`.
 * Every failure surfaces as a thrown `StorageError` (answered 503), never a silent `false`.
 */
export interface HeadlessStore {
  get<T>(key: string): Promise<T | undefined>;
  getMany<T>(keys: string[]): Promise<(T | undefined)[]>;
  /** `ttlMs`: the entry expires after this long (reads then find nothing). */
  set(key: string, value: unknown, ttlMs?: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Every entry whose key starts with `prefix`, in one pass. Used once, at start-up. */
  scan<T>(prefix: string): AsyncIterable<[key: string, value: T]>;
  /** SQL on the same database, where the Keyv store is SQLite or PostgreSQL (for tables of our own). */
  sql?: SqlAccess;
  close(): Promise<void>;
}

export interface SqlAccess {
  dialect: 'sqlite' | 'postgres';
  /** PostgreSQL's connection string, for connections of the fleet's own (README: Running several instances). */
  connectionString?: string;
  /** The key-value table, quoted as SQL names it; its columns are `key` and `value` (Keyv's JSON). */
  table: string;
  /** What Keyv puts before every key of this store (its namespace and a colon). */
  keyPrefix: string;
  /** Runs one statement; failures are `StorageError`s. */
  query<T>(sql: string, params?: unknown[]): Promise<T[]>;
  /**
   * Writes `value` under `key` only if the stored record's `expected` fields still hold those
   * values (a compare-and-set for stores several instances share); false if they no longer do.
   */
  setIf(key: string, value: unknown, expected: Record<string, string>): Promise<boolean>;
}

interface SqlStore {
  query(sql: string, ...params: unknown[]): Promise<Array<{ key: string; value: string }>>;
  opts: { table: string; schema?: string; dialect?: string; uri?: string };
}

function sqlStore(store: unknown): SqlStore | undefined {
  const s = store as Partial<SqlStore> | undefined;
  return typeof s?.query === 'function' && typeof s.opts?.table === 'string' ? (s as SqlStore) : undefined;
}

const SCAN_BATCH = 1000;

function fail(operation: string, error: unknown): never {
  const reason = error instanceof Error ? error.message : String(error);
  throw new StorageError(`store ${operation} failed: ${reason}`, { cause: error });
}

/** Wraps a Keyv instance. `throwOnErrors` is switched on: keyv's default swallows write errors. */
export function keyvStore(keyv: Keyv): HeadlessStore {
  keyv.throwOnErrors = true;
  const prefixOf = () => (keyv.namespace ? `${keyv.namespace}:` : '');

  // @keyv/sqlite's own iterator pages with LIMIT/OFFSET recursively (quadratic over a large
  // table), and @keyv/postgres's walks the whole namespace: walk the primary key from the prefix.
  async function* scanSql<T>(store: SqlStore, prefix: string): AsyncIterable<[string, T]> {
    const full = prefixOf() + prefix;
    const postgres = store.opts.dialect === 'postgres';
    let after = full;
    for (;;) {
      let rows: Array<{ key: string; value: string }>;
      try {
        rows = postgres
          ? await store.query(
              `SELECT key, value FROM "${store.opts.schema ?? 'public'}"."${store.opts.table}" WHERE key > $1 AND key LIKE $2 ORDER BY key LIMIT ${SCAN_BATCH}`,
              [after, `${full.replace(/[%_\\]/g, '\\$&')}%`],
            )
          : await store.query(`SELECT key, value FROM ${store.opts.table} WHERE key > ? AND key < ? ORDER BY key LIMIT ${SCAN_BATCH}`, after, `${full}\uffff`);
      } catch (error) {
        fail('scan', error);
      }
      for (const row of rows) {
        const data = (await keyv.deserialize?.(row.value)) as { value?: T } | undefined;
        if (data?.value !== undefined) yield [row.key.slice(prefixOf().length), data.value];
      }
      if (rows.length < SCAN_BATCH) return;
      after = rows[rows.length - 1]!.key;
    }
  }

  async function* scanGeneric<T>(prefix: string): AsyncIterable<[string, T]> {
    const iterator = keyv.iterator;
    if (!iterator) throw new StorageError('this Keyv store cannot be iterated; use an iterable store');
    try {
      for await (const [key, value] of iterator.call(keyv, keyv.namespace)) {
        if (typeof key === 'string' && key.startsWith(prefix)) yield [key, value as T];
      }
    } catch (error) {
      fail('scan', error);
    }
  }

  const sql = sqlStore(keyv.store);
  const dialect = sql?.opts.dialect === 'postgres' ? 'postgres' : 'sqlite';
  return {
    ...(sql
      ? {
          sql: {
            dialect,
            table: dialect === 'postgres' ? `"${sql.opts.schema ?? 'public'}"."${sql.opts.table}"` : `"${sql.opts.table}"`,
            keyPrefix: prefixOf(),
            ...(dialect === 'postgres' && sql.opts.uri ? { connectionString: sql.opts.uri } : {}),
            async query<T>(text: string, params: unknown[] = []) {
              // @keyv/postgres takes the values as one array; @keyv/sqlite as arguments.
              const run = () => (dialect === 'postgres' ? sql.query(text, params) : sql.query(text, ...params)) as Promise<T[]>;
              try {
                return await run();
              } catch (error) {
                // Instances starting together race on PostgreSQL's `CREATE … IF NOT EXISTS` (a duplicate key, table or
                // type): the loser finds it made when it tries again.
                if (!(dialect === 'postgres' && /^CREATE /.test(text) && ['23505', '42P07', '42710'].includes((error as { code?: string }).code ?? '')))
                  fail('query', error);
                try {
                  return await run();
                } catch (again) {
                  fail('query', again);
                }
              }
            },
            async setIf(key: string, value: unknown, expected: Record<string, string>) {
              const pg = dialect === 'postgres';
              const text = await keyv.serializeData({ value, expires: undefined });
              const field = (name: string) => (pg ? `(value::jsonb #>> '{value,${name}}')` : `json_extract(value, '$.value.${name}')`);
              const names = Object.keys(expected);
              let n = 2;
              const where = names.map((name) => `${field(name)} = ${pg ? `$${++n}` : '?'}`).join(' AND ');
              const statement = `UPDATE ${this.table} SET value = ${pg ? '$1' : '?'} WHERE key = ${pg ? '$2' : '?'} AND ${where} RETURNING key`;
              const rows = await this.query(statement, [text, prefixOf() + key, ...names.map((name) => expected[name])]);
              return rows.length === 1;
            },
          } satisfies SqlAccess,
        }
      : {}),
    async get<T>(key: string) {
      try {
        return (await keyv.get<T>(key)) ?? undefined;
      } catch (error) {
        fail('read', error);
      }
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return [];
      try {
        return (await keyv.getMany<T>(keys)).map((v) => v ?? undefined);
      } catch (error) {
        fail('read', error);
      }
    },
    async set(key, value, ttlMs) {
      let ok: boolean;
      try {
        ok = await keyv.set(key, value, ttlMs);
      } catch (error) {
        fail('write', error);
      }
      if (!ok) fail('write', 'the store reported the write as not done');
    },
    async delete(key) {
      try {
        await keyv.delete(key);
      } catch (error) {
        fail('delete', error);
      }
    },
    scan<T>(prefix: string) {
      return sql ? scanSql<T>(sql, prefix) : scanGeneric<T>(prefix);
    },
    async close() {
      await keyv.disconnect();
    },
  };
}

/** The embedded default: in memory, gone when the process ends. */
export function createMemoryKeyv(): Keyv {
  return new Keyv({ namespace: 'hrw', throwOnErrors: true });
}

/**
 * The daemon's store: a SQLite file under `dataDir`, durable across a crash (WAL journal,
 * `synchronous=FULL`: every commit is fsynced), its journal kept small, waiting up to 5 s on a
 * lock before failing.
 */
export async function createSqliteKeyv(dataDir: string): Promise<Keyv> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const { KeyvSqlite } = await import('@keyv/sqlite');
  const file = join(dataDir, 'headless.sqlite');
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
 * A store in PostgreSQL, which several instances may share (README: Running several
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
