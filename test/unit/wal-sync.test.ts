import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { StorageError } from '../../src/contract/problems';
import { waitFor } from '../helpers/wait';
import { type NodeSqlite, loadNodeSqlite, openNodeSqlite } from '../../src/core/store/node-sqlite';

/** Every fsync the connection asks for, held until the test lets it go (or fails it). */
const syncs: Array<{ path: string; release(error?: Error): void }> = [];
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>();
  return {
    ...fs,
    open: async (path: string, flags: string) => {
      const handle = await fs.open(path, flags);
      const held = Object.create(handle) as FileHandle;
      held.sync = () =>
        new Promise<void>((resolve, reject) => {
          syncs.push({ path, release: (error) => (error ? reject(error) : handle.sync().then(resolve, reject)) });
        });
      held.close = () => handle.close();
      return held;
    },
  };
});

const builtIn = loadNodeSqlite();
const drivers: Array<[string, NodeSqlite]> = [
  ...(builtIn ? [[`Node's own node:sqlite (${process.versions.node})`, builtIn] as [string, NodeSqlite]] : []),
  [`@photostructure/sqlite (${process.versions.node})`, (await import('@photostructure/sqlite')) as NodeSqlite],
];

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  syncs.length = 0;
});

/** Waits, however slow the machine, until `n` fsyncs are held. */
const held = (n: number) => waitFor(() => syncs.length >= n, { what: `${n} fsync(s) to be asked for` });

/** Lets event-loop turns pass (the thread pool's work included) so anything not held would settle. */
const turns = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setTimeout(resolve, 1));
};

async function openWal(sqlite: NodeSqlite) {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-wal-sync-'));
  dirs.push(dir);
  const file = join(dir, 'db.sqlite');
  const db = openNodeSqlite(sqlite, file, ['PRAGMA journal_mode=WAL', 'PRAGMA synchronous=FULL'], 5000);
  return { dir, file, db };
}

/** Releases held fsyncs until `promise` settles; returns how many were released. */
async function releaseUntil(promise: Promise<unknown>): Promise<number> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  let released = 0;
  for (let i = 0; i < 50 && !settled; i++) {
    for (const sync of syncs.splice(0)) {
      sync.release();
      released++;
    }
    await turns(2);
  }
  return released;
}

describe.each(drivers)('the WAL fsynced off the event loop, on %s', (_, sqlite) => {
  it('a statement answers only after the WAL (and, the first time, its folder) is fsynced after its commit', async () => {
    const { dir, file, db } = await openWal(sqlite);
    const pragma = db.query('PRAGMA synchronous');
    await held(1);
    expect(syncs.map((s) => s.path)).toEqual([`${file}-wal`]);
    syncs.splice(0)[0]?.release();
    await held(1);
    expect(syncs.map((s) => s.path)).toEqual([dir]);
    syncs.splice(0)[0]?.release();
    expect(await pragma).toEqual([{ synchronous: 1 }]);
    await releaseUntil(db.query('CREATE TABLE t (k TEXT PRIMARY KEY)'));
    let answered = false;
    const write = db.query('INSERT INTO t VALUES (?)', ['a']).then(() => (answered = true));
    await held(1);
    await turns();
    expect(answered).toBe(false);
    expect(syncs.map((s) => s.path)).toEqual([`${file}-wal`]);
    syncs.splice(0)[0]?.release();
    await write;
    expect(answered).toBe(true);
    await db.close();
  });

  it('commits while an fsync runs share the next one; a failed fsync fails its group as the store refusing it', async () => {
    const { file, db } = await openWal(sqlite);
    await releaseUntil(db.query('CREATE TABLE t (k TEXT PRIMARY KEY)'));
    const first = db.query('INSERT INTO t VALUES (?)', ['a']);
    await held(1);
    expect(syncs).toHaveLength(1);
    // Three more groups (three turns) commit while the first fsync is held: one fsync follows for all.
    const later: Promise<unknown>[] = [];
    for (const k of ['b', 'c', 'd']) {
      later.push(db.query('INSERT INTO t VALUES (?)', [k]));
      await turns(1);
    }
    expect(syncs).toHaveLength(1);
    syncs.splice(0)[0]?.release();
    await first;
    await held(1);
    expect(syncs.map((s) => s.path)).toEqual([`${file}-wal`]);
    syncs.splice(0)[0]?.release(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    for (const result of await Promise.allSettled(later)) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageError);
      expect(String((result as PromiseRejectedResult).reason.message)).toContain('EIO');
    }
    const after = db.query('SELECT count(*) AS n FROM t');
    await releaseUntil(after);
    expect(await after).toEqual([{ n: 4 }]);
    await releaseUntil(db.close());
  });
});

describe('outside WAL mode', () => {
  it.each(drivers)('on %s: SQLite syncs in COMMIT itself (synchronous stays FULL) and nothing else is asked', async (_, sqlite) => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-wal-sync-'));
    dirs.push(dir);
    const db = openNodeSqlite(sqlite, join(dir, 'db.sqlite'), ['PRAGMA synchronous=FULL'], 5000);
    await db.query('CREATE TABLE t (k TEXT)');
    await db.query('INSERT INTO t VALUES (?)', ['a']);
    expect(await db.query('PRAGMA synchronous')).toEqual([{ synchronous: 2 }]);
    expect(syncs).toEqual([]);
    await db.close();
  });
});

describe('while an fsync runs', () => {
  it('the open group is not committed: the next turns join it, and it is committed (and fsynced) once the fsync ends', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-wal-sync-'));
    dirs.push(dir);
    const file = join(dir, 'db.sqlite');
    writeFileSync(`${file}-wal`, '');
    const calls: string[] = [];
    const sqlite: NodeSqlite = {
      DatabaseSync: class {
        exec(text: string) {
          if (!text.startsWith('PRAGMA')) calls.push(text);
        }
        prepare(text: string) {
          return {
            all: () => {
              if (text === 'PRAGMA journal_mode') return [{ journal_mode: 'wal' }];
              calls.push(text);
              return [];
            },
          };
        }
        close() {}
      },
    };
    const db = openNodeSqlite(sqlite, file, [], 5000);
    await releaseUntil(db.query('INSERT a'));
    calls.length = 0;
    const first = db.query('INSERT b');
    await held(1);
    expect(syncs).toHaveLength(1);
    const later: Promise<unknown>[] = [];
    for (const k of ['c', 'd', 'e']) {
      later.push(db.query(`INSERT ${k}`));
      await turns(1);
    }
    expect(calls).toEqual(['BEGIN IMMEDIATE', 'INSERT b', 'COMMIT', 'BEGIN IMMEDIATE', 'INSERT c', 'INSERT d', 'INSERT e']);
    syncs.splice(0)[0]?.release();
    await first;
    await held(1);
    expect(calls.slice(-1)).toEqual(['COMMIT']);
    expect(syncs).toHaveLength(1);
    syncs.splice(0)[0]?.release();
    await Promise.all(later);
    await db.close();
  });
});
