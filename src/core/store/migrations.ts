/**
 * @module The SQL store's schema, as the migrations that make it, oldest first. A migration is
 * never edited once released: a new column, index or table is a new entry at the end, with its
 * statements for each dialect (docs/internals.md: The store and its migrations). `{sorted}` is
 * the type of a key or id that must compare byte by byte (a prefix is then a range): PostgreSQL
 * needs the "C" collation for it, SQLite's TEXT already does.
 */

export interface Migration {
  /** 1, 2, 3… in order, no gaps: the schema version the database has once it is applied. */
  version: number;
  /** What it changes, for the logs and the reader. */
  name: string;
  sqlite: readonly string[];
  postgres: readonly string[];
}

/** A record table as sql-table.ts reads it: its lookup columns beside the record, an index per lookup. */
const recordTable = (name: string, flagColumns = '') => [
  `CREATE TABLE IF NOT EXISTS headless_${name} (id {sorted} PRIMARY KEY, grp TEXT NOT NULL, bucket TEXT NOT NULL, owner TEXT${flagColumns}, record TEXT NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS headless_${name}_grp ON headless_${name} (grp, id)`,
  `CREATE INDEX IF NOT EXISTS headless_${name}_grp_bucket ON headless_${name} (grp, bucket, id)`,
  `CREATE INDEX IF NOT EXISTS headless_${name}_bucket ON headless_${name} (bucket, id)`,
];

/**
 * Version 1: the tables the service made before its schema had a version. `IF NOT EXISTS`
 * throughout, so on a database made then it changes nothing and only records the version.
 */
const INITIAL = [
  'CREATE TABLE IF NOT EXISTS headless_kv (key {sorted} PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT)',
  ...recordTable('run', ', flag_deliverydueat TEXT'),
  'CREATE INDEX IF NOT EXISTS headless_run_flag_deliverydueat ON headless_run (id) WHERE flag_deliverydueat IS NOT NULL',
  ...recordTable('inbox'),
  ...recordTable('approvals'),
  ...recordTable('trigger_deliveries'),
];

/** One statement list written once for both dialects, `{sorted}` filled in for each. */
export function bothDialects(version: number, name: string, statements: readonly string[]): Migration {
  return {
    version,
    name,
    sqlite: statements.map((s) => s.replaceAll('{sorted}', 'TEXT')),
    postgres: statements.map((s) => s.replaceAll('{sorted}', 'TEXT COLLATE "C"')),
  };
}

/**
 * Version 2: in PostgreSQL each change of a run record is announced (`NOTIFY headless_run_changed`,
 * "<its id> <its workspace>"), by the database itself, so whoever writes, every member hears it and drops what it kept
 * of that run (runs/records.ts). SQLite has one instance: nothing to announce.
 */
const RUN_CHANGED = [
  `CREATE OR REPLACE FUNCTION headless_run_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('headless_run_changed', COALESCE(NEW.id, OLD.id) || ' ' || COALESCE(NEW.grp, OLD.grp));
  RETURN NULL;
END $$`,
  'DROP TRIGGER IF EXISTS headless_run_changed ON headless_run',
  'CREATE TRIGGER headless_run_changed AFTER INSERT OR UPDATE OR DELETE ON headless_run FOR EACH ROW EXECUTE FUNCTION headless_run_changed()',
];

/**
 * Version 3: the fleet's own tables (fleet/postgres-fleet.ts), which its members made themselves
 * before: its members and their leases, the claims they hold, and what each runs. `IF NOT EXISTS`,
 * so a database a fleet already used keeps them as they are. SQLite has one instance: no fleet.
 */
const FLEET = [
  'CREATE TABLE IF NOT EXISTS headless_instances (id TEXT PRIMARY KEY, machine TEXT NOT NULL, expires_at TIMESTAMPTZ NOT NULL)',
  'CREATE TABLE IF NOT EXISTS headless_claims (key TEXT PRIMARY KEY, holder TEXT NOT NULL, owner TEXT NOT NULL)',
  'CREATE INDEX IF NOT EXISTS headless_claims_owner ON headless_claims (owner)',
  'CREATE TABLE IF NOT EXISTS headless_served (workspace_id TEXT NOT NULL, instance_id TEXT NOT NULL, definition JSONB NOT NULL, PRIMARY KEY (workspace_id, instance_id))',
];

export const MIGRATIONS: readonly Migration[] = [
  bothDialects(1, 'the tables made before the schema had a version', INITIAL),
  { version: 2, name: "each change of a run record is announced to the fleet's members", sqlite: [], postgres: RUN_CHANGED },
  { version: 3, name: "the fleet's tables: its members, their claims, what each runs", sqlite: [], postgres: FLEET },
];
