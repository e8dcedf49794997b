/**
 * @module The SQL stores the service ships, as the `store` option takes them: SQLite (the
 * daemon's) and PostgreSQL (a fleet's), the service's own database, whose schema is brought to
 * this code's version as it opens (migrate.ts) or refused when it is newer.
 */
import { join } from 'node:path';
import type { HeadlessStore } from './headless-store';
import { migrate } from './migrate';
import { type SqlDatabase, openPostgres, openSqlite } from './sql-database';
import { sqlStore } from './sql-store';

/** The daemon's store: a SQLite file under `dataDir` (sql-database.ts: durable, private, WAL). */
export async function createSqliteStore(dataDir: string): Promise<HeadlessStore> {
  return migrated(await openSqlite(dataDir, join(dataDir, 'headless.sqlite')));
}

/**
 * A store in PostgreSQL, which several instances may share (docs/deployment.md: Running several
 * instances). Connects once, so a wrong URL fails here, saying which.
 */
export async function createPostgresStore(url: string): Promise<HeadlessStore> {
  return migrated(await openPostgres(url));
}

/** The store over `db` once its schema is this code's; the database is closed if that fails. */
async function migrated(db: SqlDatabase): Promise<HeadlessStore> {
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return sqlStore(db);
}
