import type { Keyv } from 'keyv';
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

/** A field of the record Keyv stores as `{"value": …}` in the `value` column, as each dialect reads it. */
export function recordField(dialect: SqlAccess['dialect'], name: string): string {
  return dialect === 'postgres' ? `(value::jsonb #>> '{value,${name}}')` : `json_extract(value, '$.value.${name}')`;
}

export interface SqlAccess {
  dialect: 'sqlite' | 'postgres';
  /** PostgreSQL's connection string, for connections of the fleet's own (docs/deployment.md: Running several instances). */
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
              const names = Object.keys(expected);
              let n = 2;
              const where = names.map((name) => `${recordField(dialect, name)} = ${pg ? `$${++n}` : '?'}`).join(' AND ');
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
