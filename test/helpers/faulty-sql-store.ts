import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StorageError } from '../../src/contract/problems';
import type { HeadlessStore } from '../../src/core/store/headless-store';
import { migrate } from '../../src/core/store/migrate';
import { type SqlDatabase, openSqlite } from '../../src/core/store/sql-database';
import { sqlStore } from '../../src/core/store/sql-store';
import { type Faults, type Write, attempt, written } from './faulty-store';

/**
 * The service's own SQLite store (sql-stores.ts `createSqliteStore`: its tables with real columns,
 * migrated) with faultyKeyv's faults, made where its statements are run: each statement that
 * writes is logged under the key the Keyv tier logs it by (`kind:id`, with the value written) and
 * refused, as SQLite refuses one on a full disk (a StorageError, nothing written), where
 * `faults.refuse` says. The file outlives the service: `store()` opens it again, as after a restart.
 */
export function faultySqlite(dir = mkdtempSync(join(tmpdir(), 'hrw-faulty-sql-'))) {
  const state: Faults = { writes: [], refused: [] };
  const store = async (): Promise<HeadlessStore> => {
    const db = await openSqlite(dir, join(dir, 'headless.sqlite'));
    await migrate(db);
    return sqlStore(faultyDatabase(db, state));
  };
  return { store, state, dir };
}

function faultyDatabase(db: SqlDatabase, state: Faults): SqlDatabase {
  return {
    ...db,
    async query<T>(text: string, params: unknown[] = []): Promise<T[]> {
      const write = writeOf(text, params);
      if (write) {
        await state.hold?.(write);
        attempt(state, write, (message) => StorageError.of('query', new Error(message)));
      }
      return db.query<T>(text, params);
    },
  };
}

/**
 * A statement of sql-store.ts or sql-table.ts that writes, as the Keyv tier names the write: an
 * entry of `headless_kv` by its key, a row of `headless_<name>` as `<name>:<id>`, with the JSON it
 * writes (a table row's record is its last column). Undefined for a read.
 */
function writeOf(text: string, params: unknown[]): Write | undefined {
  const statement = /^\s*(INSERT INTO|UPDATE|DELETE FROM)\s+headless_(\w+)/.exec(text);
  if (!statement) return undefined;
  const [, verb, table] = statement;
  const json = (value: unknown) => written(typeof value === 'string' ? JSON.parse(value) : undefined);
  if (table === 'kv') return { key: String(params[0]), ...(verb === 'INSERT INTO' ? json(params[1]) : {}) };
  // putIf: SET the columns, then WHERE id, bucket, owner.
  if (verb === 'UPDATE') return { key: `${table}:${String(params.at(-3))}`, ...json(params.at(-4)) };
  return { key: `${table}:${String(params[0])}`, ...(verb === 'INSERT INTO' ? json(params.at(-1)) : {}) };
}
