/**
 * @module A record table in the service's own SQL database: `headless_<name>` with the columns its
 * lookups read (group, bucket, owner, one per flag) beside the record's JSON, all written by the
 * one statement that writes the record, so no lookup can disagree with it. Indexes serve each
 * lookup; a compare-and-set is an UPDATE on the bucket and owner columns. The tables are made by
 * the migrations (migrations.ts); `load` only checks that the one it reads has its columns.
 */
import { StorageError } from '../../contract/problems';
import { type CollectionSpec, type RecordTable, bucketOf } from './headless-store';
import type { SqlDatabase } from './sql-database';

const column = (flag: string) => `flag_${flag.replace(/[^A-Za-z0-9]/g, '_').toLowerCase()}`;

export function sqlTable<T extends object>(db: SqlDatabase, spec: CollectionSpec<T>): RecordTable<T> {
  const table = `headless_${spec.name}`;
  const flags = (spec.flags ?? []).map((flag) => ({ flag: flag as string, column: column(flag) }));
  const field = (record: T, name: string) => (record as Record<string, unknown>)[name];
  const text = (value: unknown) => (value === undefined || value === null ? null : String(value));
  const columns = ['grp', 'bucket', 'owner', ...flags.map((f) => f.column), 'record'];
  const values = (record: T) => [
    String(field(record, spec.group)),
    bucketOf(spec, record),
    spec.owner === undefined ? null : text(field(record, spec.owner)),
    ...flags.map((f) => text(field(record, f.flag))),
    JSON.stringify(record),
  ];
  const ids = async (sql: string, params: unknown[] = []) => (await db.query<{ id: string }>(sql, params)).map((row) => row.id);
  const records = async (sql: string, params: unknown[]) => new Map((await db.query<{ id: string; record: string }>(sql, params)).map((r) => [r.id, r.record]));
  const set = columns.map((c) => `${c} = ?`).join(', ');
  const parsed = (record: string | undefined) => (record === undefined ? undefined : (JSON.parse(record) as T));

  return {
    load: () => checkColumns(db, table, ['id', ...columns]),
    get: async (id) => parsed((await records(`SELECT id, record FROM ${table} WHERE id = ?`, [id])).get(id)),
    async getMany(wanted) {
      if (wanted.length === 0) return [];
      const found = await records(`SELECT id, record FROM ${table} WHERE id IN (${wanted.map(() => '?').join(', ')})`, wanted);
      return wanted.map((id) => parsed(found.get(id)));
    },
    async put(id, record) {
      const names = ['id', ...columns];
      await db.query(
        `INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) ON CONFLICT (id) DO UPDATE SET ${columns.map((c) => `${c} = excluded.${c}`).join(', ')}`,
        [id, ...values(record)],
      );
    },
    async putIf(id, record, expected) {
      const updated = await ids(`UPDATE ${table} SET ${set} WHERE id = ? AND bucket = ? AND owner = ? RETURNING id`, [
        ...values(record),
        id,
        expected.bucket,
        expected.owner,
      ]);
      return updated.length === 1;
    },
    async delete(id) {
      await db.query(`DELETE FROM ${table} WHERE id = ?`, [id]);
    },
    page: (group, bucket, limit, cursor) => pageOf(ids, table, { group, bucket, limit, cursor }),
    inBucket: (bucket) => ids(`SELECT id FROM ${table} WHERE bucket = ? ORDER BY id`, [bucket]),
    count: (bucket, before) => countIn(db, table, bucket, before),
    flagged(flag) {
      const f = flags.find((x) => x.flag === flag);
      if (!f) throw new Error(`${table} has no lookup by ${flag}`);
      return ids(`SELECT id FROM ${table} WHERE ${f.column} IS NOT NULL ORDER BY id`);
    },
    oldest: (bound, limit) => ids(`SELECT id FROM ${table} WHERE id < ? ORDER BY id LIMIT ?`, [bound, limit]),
  };
}

/** How many records are in `bucket`, of those made before the id `before` where it is given. */
async function countIn(db: SqlDatabase, table: string, bucket: string, before: string | undefined): Promise<number> {
  const where = before === undefined ? 'bucket = ?' : 'bucket = ? AND id < ?';
  const [row] = await db.query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, before === undefined ? [bucket] : [bucket, before]);
  return Number(row?.n ?? 0);
}

/** Newest first, ids strictly older than `cursor`; one more is read to know whether a page follows. */
async function pageOf(
  ids: (sql: string, params: unknown[]) => Promise<string[]>,
  table: string,
  q: { group: string; bucket?: string; limit: number; cursor?: string },
) {
  const where = ['grp = ?', ...(q.bucket === undefined ? [] : ['bucket = ?']), ...(q.cursor === undefined ? [] : ['id < ?'])].join(' AND ');
  const params = [q.group, ...(q.bucket === undefined ? [] : [q.bucket]), ...(q.cursor === undefined ? [] : [q.cursor]), q.limit + 1];
  const found = await ids(`SELECT id FROM ${table} WHERE ${where} ORDER BY id DESC LIMIT ?`, params);
  const page = found.slice(0, q.limit);
  return { ids: page, next: found.length > q.limit ? (page[page.length - 1] ?? null) : null };
}

/**
 * Refuses a table that lacks a column its lookups read: a lookup added to a `CollectionSpec`
 * without the migration that adds its column fails every start, saying so, instead of every query.
 */
async function checkColumns(db: SqlDatabase, table: string, wanted: string[]): Promise<void> {
  const sql =
    db.dialect === 'postgres'
      ? 'SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?'
      : 'SELECT name FROM pragma_table_info(?)';
  const found = new Set((await db.query<{ name: string }>(sql, [table])).map((row) => row.name));
  const missing = wanted.filter((name) => !found.has(name));
  if (missing.length === 0) return;
  throw new StorageError(
    `the table ${table} lacks the column(s) ${missing.join(', ')}, which its lookups read: add a migration that makes them (docs/internals.md: The store and its migrations)`,
  );
}
