/**
 * @module A record table in the service's own SQL database: `headless_<name>` with the columns its
 * lookups read (group, bucket, owner, one per flag) beside the record's JSON, all written by the
 * one statement that writes the record, so no lookup can disagree with it. Indexes serve each
 * lookup; a compare-and-set is an UPDATE on the bucket and owner columns.
 */
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
    load: () => createTable(db, table, flags),
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

/** The table and an index per lookup, made if missing. */
async function createTable(db: SqlDatabase, table: string, flags: Array<{ column: string }>): Promise<void> {
  const id = db.dialect === 'postgres' ? 'TEXT COLLATE "C"' : 'TEXT';
  const flagColumns = flags.map((f) => `, ${f.column} TEXT`).join('');
  await db.query(
    `CREATE TABLE IF NOT EXISTS ${table} (id ${id} PRIMARY KEY, grp TEXT NOT NULL, bucket TEXT NOT NULL, owner TEXT${flagColumns}, record TEXT NOT NULL)`,
  );
  await db.query(`CREATE INDEX IF NOT EXISTS ${table}_grp ON ${table} (grp, id)`);
  await db.query(`CREATE INDEX IF NOT EXISTS ${table}_grp_bucket ON ${table} (grp, bucket, id)`);
  await db.query(`CREATE INDEX IF NOT EXISTS ${table}_bucket ON ${table} (bucket, id)`);
  for (const f of flags) await db.query(`CREATE INDEX IF NOT EXISTS ${table}_${f.column} ON ${table} (id) WHERE ${f.column} IS NOT NULL`);
}
