/**
 * @module Brings a SQL store's schema to the version this code knows, at start-up, before anything
 * reads it: the migrations it lacks (migrations.ts) run once, in order, in one transaction with
 * the version row, so a failure leaves the database as it was. Instances starting together on
 * one PostgreSQL wait for each other on an advisory lock (SQLite: the write lock), so none runs
 * a migration twice. A database newer than the code is refused, never used.
 */
import { StorageError } from '../../contract/problems';
import { MIGRATIONS, type Migration } from './migrations';
import type { SqlDatabase } from './sql-database';

/** The PostgreSQL advisory lock the migrations are run under ("hrws"); held until the transaction ends. */
const MIGRATION_LOCK = 0x68727773;

const VERSION_TABLE = 'CREATE TABLE IF NOT EXISTS headless_schema_version (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL)';

/** Applies the migrations the database lacks; returns its version, the last of `migrations`. */
export async function migrate(db: SqlDatabase, migrations: readonly Migration[] = MIGRATIONS): Promise<number> {
  const latest = checkedOrder(migrations);
  // Up to date (the usual start): read without the write lock, which another connection may hold
  // for a while (a running daemon's group commits), so a reader's open never waits on it.
  if ((await versionNow(db)) === latest) return latest;
  return db.transaction(async (query) => {
    if (db.dialect === 'postgres') await query('SELECT pg_advisory_xact_lock(?)', [MIGRATION_LOCK]);
    await query(VERSION_TABLE);
    // No row: a database made before versions (its tables are version 1's) or an empty one.
    const [row] = await query<{ version: number | string }>('SELECT version FROM headless_schema_version WHERE one = 1');
    const current = Number(row?.version ?? 0);
    if (current > latest) {
      throw new StorageError(
        `the database's schema is version ${current}, and this headless-run-webhook knows versions up to ${latest}: run a version that knows it (the database was not changed)`,
      );
    }
    for (const migration of migrations.filter((m) => m.version > current)) {
      for (const statement of migration[db.dialect]) await query(statement);
    }
    if (latest > current) {
      await query('INSERT INTO headless_schema_version (one, version) VALUES (1, ?) ON CONFLICT (one) DO UPDATE SET version = excluded.version', [latest]);
    }
    return latest;
  });
}

/** The last version; a list that is not 1, 2, 3… in order is a programming error, caught by any start. */
function checkedOrder(migrations: readonly Migration[]): number {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration ${m.name} has version ${m.version}, expected ${i + 1}`);
  });
  return migrations.length;
}

/** The recorded version, read outside any transaction; undefined where there is none yet. */
async function versionNow(db: SqlDatabase): Promise<number | undefined> {
  try {
    const [row] = await db.query<{ version: number | string }>('SELECT version FROM headless_schema_version WHERE one = 1');
    return row === undefined ? undefined : Number(row.version);
  } catch {
    // No version table yet: the transaction makes it.
    return undefined;
  }
}
