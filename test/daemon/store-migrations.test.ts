import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUN_TABLE } from '../../src/core/runs/records';
import type { StoredRun } from '../../src/core/types';
import type { CollectionSpec } from '../../src/core/store/headless-store';
import { migrate } from '../../src/core/store/migrate';
import { MIGRATIONS, type Migration, bothDialects } from '../../src/core/store/migrations';
import { type SqlDatabase, openPostgres, openSqlite } from '../../src/core/store/sql-database';
import { sqlStore } from '../../src/core/store/sql-store';
import { createPostgresStore } from '../../src/core/store/sql-stores';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';
import { api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';

/** The SQL store's schema versions (docs/internals.md: The store and its migrations), from a database made before they existed. */

interface Before {
  ddl: { sqlite: string[]; postgres: string[] };
  rows: { headless_kv: Array<{ key: string; value: string; expires_at: null }>; headless_run: Array<Record<string, string | null>> };
}
const BEFORE = JSON.parse(readFileSync(join(__dirname, '../fixtures/store/schema-before-versions.json'), 'utf8')) as Before;
const [SUCCEEDED, FAILED] = BEFORE.rows.headless_run.map((row) => String(row.id));
const LATEST = MIGRATIONS.length;

const dirs: string[] = [];
let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
}, 600_000);
afterAll(async () => {
  cleanupDaemons(dirs);
  await postgres?.stop();
});

/** `statements`, then the fixture's rows, on `query`: what the code before versions left. */
async function fill(query: (text: string, params?: unknown[]) => Promise<unknown>, statements: string[]): Promise<void> {
  for (const statement of statements) await query(statement);
  for (const row of BEFORE.rows.headless_kv) await query('INSERT INTO headless_kv (key, value, expires_at) VALUES (?, ?, NULL)', [row.key, row.value]);
  for (const row of BEFORE.rows.headless_run) {
    await query('INSERT INTO headless_run (id, grp, bucket, owner, flag_deliverydueat, record) VALUES (?, ?, ?, ?, ?, ?)', [
      row.id,
      row.grp,
      row.bucket,
      row.owner,
      row.flag_deliverydueat,
      row.record,
    ]);
  }
}

/** Every row of the tables the fixture filled, in key order. */
async function rowsOf(db: SqlDatabase) {
  return {
    headless_kv: await db.query('SELECT key, value, expires_at FROM headless_kv ORDER BY key'),
    headless_run: await db.query('SELECT id, grp, bucket, owner, flag_deliverydueat, record FROM headless_run ORDER BY id'),
  };
}
const sorted = <T extends Record<string, unknown>>(rows: T[], key: string) => [...rows].sort((a, b) => String(a[key]).localeCompare(String(b[key])));
const FIXTURE_ROWS = { headless_kv: sorted(BEFORE.rows.headless_kv, 'key'), headless_run: sorted(BEFORE.rows.headless_run, 'id') };

const versionOf = async (db: SqlDatabase) => Number((await db.query<{ version: number }>('SELECT version FROM headless_schema_version'))[0]?.version);

/** A SQLite data dir holding what a daemon of the code before versions left there. */
async function sqliteBefore(): Promise<string> {
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir, { retentionDays: 0 });
  const db = await openSqlite(join(dir, '.headless'), join(dir, '.headless', 'headless.sqlite'));
  await db.transaction((query) => fill(query, BEFORE.ddl.sqlite));
  await db.close();
  return dir;
}

const openData = (dir: string) => openSqlite(join(dir, '.headless'), join(dir, '.headless', 'headless.sqlite'));

describe('schema versions', () => {
  it('version 1 is exactly what the code before versions ran to make its tables, in both dialects', () => {
    expect(MIGRATIONS[0]?.sqlite).toEqual(BEFORE.ddl.sqlite);
    expect(MIGRATIONS[0]?.postgres).toEqual(BEFORE.ddl.postgres);
  });

  it('the daemon starts on a SQLite database made before versions: its runs, output, events and Sessions are there, unchanged, at the latest version', async () => {
    const dir = await sqliteBefore();
    const daemon = await startDaemon(dir);
    expect(await (await api(daemon, 'GET', `/api/headless/${SUCCEEDED}`)).json()).toMatchObject({ status: 'succeeded', exitCode: 0, title: 'first' });
    expect(await (await api(daemon, 'GET', `/api/headless/${SUCCEEDED}/output`)).json()).toMatchObject({ stdout: 'session=v1-a\nfirst\n' });
    const events = (await (await api(daemon, 'GET', `/api/headless/${SUCCEEDED}/events?format=json`)).json()) as { events: Array<{ type: string }> };
    expect(events.events.map((e) => e.type)).toEqual(['run.started', 'agent.session', 'run.ended']);
    const resumeId = JSON.parse(String(BEFORE.rows.headless_run[0]?.record)).resumeId as string;
    expect(await (await api(daemon, 'GET', `/api/sessions/${resumeId}`)).json()).toMatchObject({ resumable: true });
    // The lookups read the old columns and indexes: by workspace, and by workspace and status.
    const list = async (query: string) =>
      ((await (await api(daemon, 'GET', `/api/headless?${query}`)).json()) as { runs: Array<{ taskId: string }> }).runs.map((r) => r.taskId);
    expect(await list('wsId=ws')).toEqual([FAILED, SUCCEEDED]);
    expect(await list('wsId=ws&status=failed')).toEqual([FAILED]);
    expect(await daemon.stop()).toBe(0);

    const db = await openData(dir);
    expect(await versionOf(db)).toBe(LATEST);
    expect(await rowsOf(db)).toEqual(FIXTURE_ROWS);
    await db.close();

    // And it keeps working: a new run on it, after a restart.
    const again = await startDaemon(dir);
    const started = (await (await api(again, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo after', agent: 'fake' })).json()) as { taskId: string };
    expect(await waitRun(again, started.taskId)).toMatchObject({ status: 'succeeded' });
    await again.stop();
  });

  it('a database whose schema is newer than the code is refused at start, naming both versions, and left as it was', async () => {
    const dir = await sqliteBefore();
    const db = await openData(dir);
    await migrate(db);
    await db.query('UPDATE headless_schema_version SET version = ?', [LATEST + 1]);
    await db.close();
    const started = await runCli(['serve', '--port', '0'], { cwd: dir, env: { HEADLESS_DATA_DIR: join(dir, '.headless') } });
    expect(started.code).toBe(1);
    expect(started.stderr).toContain(`the database's schema is version ${LATEST + 1}, and this headless-run-webhook knows versions up to ${LATEST}`);
    const after = await openData(dir);
    expect(await versionOf(after)).toBe(LATEST + 1);
    expect(await rowsOf(after)).toEqual(FIXTURE_ROWS);
    await after.close();
  });

  it('the PostgreSQL store opens a database made before versions with its data intact, at the latest version', async () => {
    const url = await postgres.database();
    const raw = await openPostgres(url);
    await raw.transaction((query) => fill(query, BEFORE.ddl.postgres));
    const store = await createPostgresStore(url);
    const runs = store.table(RUN_TABLE);
    await runs.load();
    expect((await runs.page('ws', undefined, 10)).ids).toEqual([FAILED, SUCCEEDED]);
    expect(await runs.get(String(FAILED))).toMatchObject({ status: 'failed', exitCode: 3, title: 'second' });
    expect(await store.get(`output:${SUCCEEDED}`)).toMatchObject({ stdout: 'session=v1-a\nfirst\n' });
    expect(await versionOf(raw)).toBe(LATEST);
    expect(await rowsOf(raw)).toEqual(FIXTURE_ROWS);
    // The fleet's tables are the store's (version 3), there before any member joins.
    const fleetTables = await raw.query<{ name: string | null }>(
      "SELECT to_regclass(t)::text AS name FROM unnest(ARRAY['headless_instances', 'headless_claims', 'headless_served']) AS t",
    );
    expect(fleetTables.map((r) => r.name)).toEqual(['headless_instances', 'headless_claims', 'headless_served']);
    await store.close();
    await raw.close();
  });
});

/** A lookup a feature adds: the spec gains a flag, and a migration adds its column, index and values. */
const WITH_REVIEW: CollectionSpec<StoredRun> = { ...RUN_TABLE, flags: ['deliveryDueAt', 'reviewAt' as keyof StoredRun & string] };
const ADD_REVIEW = (statements: Record<'sqlite' | 'postgres', string>): Migration => {
  const added = bothDialects(LATEST + 1, 'a lookup by reviewAt', [
    'ALTER TABLE headless_run ADD COLUMN flag_reviewat TEXT',
    'CREATE INDEX headless_run_flag_reviewat ON headless_run (id) WHERE flag_reviewat IS NOT NULL',
  ]);
  // The records already stored get the column's value from their JSON: the one statement per dialect.
  return { ...added, sqlite: [...added.sqlite, statements.sqlite], postgres: [...added.postgres, statements.postgres] };
};
const WITH_MIGRATION = [
  ...MIGRATIONS,
  ADD_REVIEW({
    sqlite: "UPDATE headless_run SET flag_reviewat = json_extract(record, '$.reviewAt')",
    postgres: "UPDATE headless_run SET flag_reviewat = record::json->>'reviewAt'",
  }),
];

const databases: Array<[string, () => Promise<() => Promise<SqlDatabase>>]> = [
  [
    'sqlite',
    async () => {
      const dir = tempDir();
      dirs.push(dir);
      return () => openData(dir);
    },
  ],
  [
    'postgres',
    async () => {
      const url = await postgres.database();
      return () => openPostgres(url);
    },
  ],
];

describe.each(databases)('a migration that adds a column: %s', (_name, make) => {
  it('is one entry in the list; it runs once on a database with data in it, and the new lookup finds the old records', async () => {
    const open = await make();
    const db = await open();
    expect(await migrate(db)).toBe(LATEST);
    const before = sqlStore(db).table(RUN_TABLE);
    await before.load();
    const old = { taskId: 'run_1', workspaceId: 'ws', status: 'succeeded', bootId: 'b', reviewAt: '2030-01-01T00:00:00Z' } as unknown as StoredRun;
    await before.put('run_1', old);
    await before.put('run_2', { ...old, taskId: 'run_2', reviewAt: undefined } as unknown as StoredRun);
    // The spec's new lookup without its migration: every start says what is missing.
    await expect(sqlStore(db).table(WITH_REVIEW).load()).rejects.toThrow(/headless_run lacks the column\(s\) flag_reviewat.*add a migration/);

    expect(await migrate(db, WITH_MIGRATION)).toBe(LATEST + 1);
    // Once: its statements have no IF NOT EXISTS, so running them again would fail.
    expect(await migrate(db, WITH_MIGRATION)).toBe(LATEST + 1);
    expect(await versionOf(db)).toBe(LATEST + 1);
    const after = sqlStore(db).table(WITH_REVIEW);
    await after.load();
    expect(await after.get('run_1')).toEqual(old);
    expect(await after.flagged('reviewAt')).toEqual(['run_1']);
    await after.put('run_3', { ...old, taskId: 'run_3' });
    expect(await after.flagged('reviewAt')).toEqual(['run_1', 'run_3']);
    // The code that knows only the versions before it now refuses this database.
    await expect(migrate(db)).rejects.toThrow(`the database's schema is version ${LATEST + 1}, and this headless-run-webhook knows versions up to ${LATEST}`);
    await db.close();
  });

  it('a migration that fails leaves the database as it was: no statement of it and no new version', async () => {
    const db = await (await make())();
    await migrate(db);
    const broken = [...MIGRATIONS, ADD_REVIEW({ sqlite: 'UPDATE no_such_table SET x = 1', postgres: 'UPDATE no_such_table SET x = 1' })];
    await expect(migrate(db, broken)).rejects.toThrow(/no_such_table/);
    expect(await versionOf(db)).toBe(LATEST);
    await expect(sqlStore(db).table(WITH_REVIEW).load()).rejects.toThrow(/flag_reviewat/);
    await db.close();
  });
});

describe('instances starting together on one PostgreSQL', () => {
  it('wait for the one migrating: the migrations run under an advisory lock', async () => {
    const url = await postgres.database();
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1)', [0x68727773]);
    const db = await openPostgres(url);
    const migrating = migrate(db);
    // Bounded: the migration is seen waiting for the lock, not finished without it.
    let waiting = 0;
    for (let i = 0; i < 200 && waiting === 0; i++) {
      waiting = (await holder.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rowCount ?? 0;
      if (waiting === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(waiting).toBe(1);
    await holder.query('COMMIT');
    expect(await migrating).toBe(LATEST);
    await holder.end();
    await db.close();
  });

  it('run each migration once, however many start at once', async () => {
    const url = await postgres.database();
    // Not repeatable: a second run of it would fail on the key.
    const once = [...MIGRATIONS, bothDialects(LATEST + 1, 'a row', ["INSERT INTO headless_kv (key, value) VALUES ('migrated', '1')"])];
    const dbs = await Promise.all(Array.from({ length: 4 }, () => openPostgres(url)));
    expect(await Promise.all(dbs.map((db) => migrate(db, once)))).toEqual([LATEST + 1, LATEST + 1, LATEST + 1, LATEST + 1]);
    expect(await dbs[0]?.query("SELECT key FROM headless_kv WHERE key = 'migrated'")).toHaveLength(1);
    await Promise.all(dbs.map((db) => db.close()));
  });
});
