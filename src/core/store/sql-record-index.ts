import type { CollectionSpec, RecordLookups } from './record-lookups';
import { type SqlAccess, recordField } from './keyv-store';

/**
 * A collection's lookups in SQLite or PostgreSQL: partial expression indexes on the key-value
 * table over the fields of each record's JSON (Keyv stores `{"value": …}`), so the database keeps
 * them with the write itself and no second row can disagree with the record. Queries repeat each
 * index's predicate word for word, which is what lets both planners use a partial index.
 */
export function sqlRecordQueries<T>(sql: SqlAccess, spec: CollectionSpec<T>): RecordLookups {
  const pg = sql.dialect === 'postgres';
  const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
  const start = sql.keyPrefix + spec.prefix;
  // Every key of the collection: a LIKE in PostgreSQL, whose default collation may not order bytes.
  const mine = pg
    ? `key LIKE ${literal(`${start.replace(/[\\%_]/g, '\\$&')}%`)}`
    : `key >= ${literal(start)} AND key < ${literal(start.slice(0, -1) + String.fromCharCode(start.charCodeAt(start.length - 1) + 1))}`;
  const field = (name: string) => recordField(sql.dialect, name);
  const ordered = pg ? 'key COLLATE "C"' : 'key';
  const name = (suffix: string) => `"${`${start}${suffix}`.replace(/[^A-Za-z0-9]+/g, '_')}"`;
  const idOf = (row: { key: string }) => row.key.slice(start.length);
  let n = 0;
  const q = <R>(text: string, params: unknown[] = []) => {
    n = 0;
    return sql.query<R>(pg ? text.replace(/\?/g, () => `$${++n}`) : text, params);
  };
  const keys = async (text: string, params: unknown[] = []) => (await q<{ key: string }>(text, params)).map(idOf);
  const group = field(spec.group);
  const by = spec.bucket;
  const bucket = by.set === undefined ? field(by.field) : `(CASE WHEN ${field(by.field)} IS NULL THEN ${literal(by.unset!)} ELSE ${literal(by.set)} END)`;

  return {
    async load() {
      const on = `ON ${sql.table}`;
      await q(`CREATE INDEX IF NOT EXISTS ${name('group')} ${on} (${group}, (${ordered})) WHERE ${mine}`);
      await q(`CREATE INDEX IF NOT EXISTS ${name('group_bucket')} ${on} (${group}, ${bucket}, (${ordered})) WHERE ${mine}`);
      await q(`CREATE INDEX IF NOT EXISTS ${name('bucket')} ${on} (${bucket}) WHERE ${mine}`);
      for (const flag of spec.flags ?? []) {
        await q(`CREATE INDEX IF NOT EXISTS ${name(flag)} ${on} ((${ordered})) WHERE ${mine} AND ${field(flag)} IS NOT NULL`);
      }
    },
    async page(groupId, bucketName, limit, cursor) {
      const where = [mine, `${group} = ?`, ...(bucketName ? [`${bucket} = ?`] : []), ...(cursor ? [`${ordered} < ?`] : [])].join(' AND ');
      const params = [groupId, ...(bucketName ? [bucketName] : []), ...(cursor ? [start + cursor] : []), limit + 1];
      const ids = await keys(`SELECT key FROM ${sql.table} WHERE ${where} ORDER BY ${ordered} DESC LIMIT ?`, params);
      const page = ids.slice(0, limit);
      return { ids: page, next: ids.length > limit ? page[page.length - 1]! : null };
    },
    inBucket: (bucketName) => keys(`SELECT key FROM ${sql.table} WHERE ${mine} AND ${bucket} = ?`, [bucketName]),
    flagged: (flag) => keys(`SELECT key FROM ${sql.table} WHERE ${mine} AND ${field(flag)} IS NOT NULL`),
    oldest: (bound, limit) => keys(`SELECT key FROM ${sql.table} WHERE ${mine} AND ${ordered} < ? ORDER BY ${ordered} LIMIT ?`, [start + bound, limit]),
  };
}
