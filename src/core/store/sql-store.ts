/**
 * @module The store over the service's own SQL database (SQLite or PostgreSQL): key-value entries in
 * `headless_kv` (JSON, with an expiry), and a table with real columns and indexes per kind of
 * record (sql-table.ts), all made by the migrations (migrations.ts). Keys and ids compare byte by
 * byte in both dialects, so a prefix is a range.
 */
import type { HeadlessStore } from './headless-store';
import type { SqlDatabase } from './sql-database';
import { sqlTable } from './sql-table';

const SCAN_BATCH = 1000;
/** The first key after every key that starts with `prefix`. */
const after = (prefix: string) => `${prefix}\uffff`;

export function sqlStore(db: SqlDatabase): HeadlessStore {
  const live = '(expires_at IS NULL OR expires_at > ?)';
  const parse = <T>(rows: Array<{ value: string }>) => rows.map((row) => JSON.parse(row.value) as T);
  return {
    database: db,
    async get<T>(key: string) {
      return parse<T>(await db.query(`SELECT value FROM headless_kv WHERE key = ? AND ${live}`, [key, Date.now()]))[0];
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return [];
      const rows = await db.query<{ key: string; value: string }>(
        `SELECT key, value FROM headless_kv WHERE key IN (${keys.map(() => '?').join(', ')}) AND ${live}`,
        [...keys, Date.now()],
      );
      const found = new Map(rows.map((row) => [row.key, JSON.parse(row.value) as T]));
      return keys.map((key) => found.get(key));
    },
    async set(key, value, ttlMs) {
      const expires = ttlMs === undefined ? null : Date.now() + ttlMs;
      await db.query(
        'INSERT INTO headless_kv (key, value, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at',
        [key, JSON.stringify(value), expires],
      );
    },
    async delete(key) {
      await db.query('DELETE FROM headless_kv WHERE key = ?', [key]);
    },
    // Expired entries included: what prunes them (idempotency keys) finds them by a scan.
    async *scan<T>(prefix: string) {
      // A batch at a time, each after the last key of the one before.
      for (let last: string | undefined; ; ) {
        const rows = await db.query<{ key: string; value: string }>(
          `SELECT key, value FROM headless_kv WHERE key ${last === undefined ? '>=' : '>'} ? AND key < ? ORDER BY key LIMIT ${SCAN_BATCH}`,
          [last ?? prefix, after(prefix)],
        );
        for (const row of rows) yield [row.key, JSON.parse(row.value) as T] as [string, T];
        if (rows.length < SCAN_BATCH) return;
        last = rows[rows.length - 1]?.key;
      }
    },
    table: (spec) => sqlTable(db, spec),
    close: () => db.close(),
  };
}
