import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { StorageError } from '../../src/contract/problems';
import { type NodeSqlite, loadNodeSqlite, openNodeSqlite } from '../../src/core/store/node-sqlite';
import { waitFor } from '../helpers/wait';

/** The real drivers: Node's own where this Node has it, and the drop-in Node 20 uses, on every Node. */
const builtIn = loadNodeSqlite();
const drivers: Array<[string, NodeSqlite]> = [
  ...(builtIn ? [[`Node's own node:sqlite (${process.versions.node})`, builtIn] as [string, NodeSqlite]] : []),
  [`@photostructure/sqlite (${process.versions.node})`, (await import('@photostructure/sqlite')) as NodeSqlite],
];

/** A stand-in for node:sqlite that records what it is asked, and fails what `failing` names. */
function recorder(busyMs = 5000) {
  const calls: string[] = [];
  const failing = new Set<string>();
  const lock = { busy: false, refused: 0 };
  const sqlite: NodeSqlite = {
    DatabaseSync: class {
      exec(text: string) {
        if (text === 'BEGIN IMMEDIATE' && lock.busy) {
          lock.refused++;
          throw Object.assign(new Error('database is locked'), { errcode: 5 });
        }
        calls.push(text);
        if (failing.has(text)) throw new Error(`${text} failed`);
      }
      prepare(text: string) {
        return {
          all: (...params: unknown[]) => {
            calls.push(`${text} ${JSON.stringify(params)}`);
            if (failing.has(text)) throw new Error(`${text} failed`);
            return [{ text }];
          },
        };
      }
      close() {
        calls.push('close');
      }
    },
  };
  return { calls, failing, lock, db: openNodeSqlite(sqlite, ':memory:', ['PRAGMA x=1'], busyMs) };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('node:sqlite connection: statements committed in groups', () => {
  it('the statements of one turn share one transaction, answered once it is committed; the next turn opens another', async () => {
    const { calls, db } = recorder();
    const answered: string[] = [];
    const first = Promise.all([db.query('INSERT a', [1, undefined, true]), db.query('SELECT b')]).then(() => answered.push('first'));
    expect(answered).toEqual([]);
    await first;
    await db.query('INSERT c');
    expect(calls).toEqual([
      'PRAGMA x=1',
      'PRAGMA busy_timeout=0',
      'PRAGMA journal_mode []',
      'BEGIN IMMEDIATE',
      'INSERT a [1,null,1]',
      'SELECT b []',
      'COMMIT',
      'BEGIN IMMEDIATE',
      'INSERT c []',
      'COMMIT',
    ]);
    expect(answered).toEqual(['first']);
  });

  it('a commit that fails fails every statement of its group, and rolls back', async () => {
    const { calls, failing, db } = recorder();
    failing.add('COMMIT');
    const results = await Promise.allSettled([db.query('INSERT a'), db.query('INSERT b')]);
    for (const result of results) {
      expect(result.status).toBe('rejected');
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageError);
      expect(String((result as PromiseRejectedResult).reason.message)).toContain('COMMIT failed');
    }
    expect(calls.slice(-2)).toEqual(['COMMIT', 'ROLLBACK']);
    failing.clear();
    await expect(db.query('INSERT c')).resolves.toEqual([{ text: 'INSERT c' }]);
  });

  it('a read whose group a full disk took back is read again from what is committed, once; the writes fail', async () => {
    const { calls, failing, db } = recorder();
    let commits = 0;
    // The first COMMIT fails (SQLITE_FULL), the next goes through: the read is answered, the write is not.
    const real = failing.has.bind(failing);
    failing.has = (text: string) => (text === 'COMMIT' ? ++commits === 1 : real(text));
    const [write, read] = await Promise.allSettled([db.query('INSERT a'), db.query('SELECT b', [1])]);
    expect(write.status).toBe('rejected');
    expect(read).toEqual({ status: 'fulfilled', value: [{ text: 'SELECT b' }] });
    expect(calls.filter((c) => c.startsWith('SELECT b'))).toHaveLength(2);
    // A disk that stays full: the read is tried once more only, then refused with its group.
    failing.has = (text: string) => text === 'COMMIT' || real(text);
    await expect(db.query('SELECT c')).rejects.toBeInstanceOf(StorageError);
    expect(calls.filter((c) => c.startsWith('SELECT c'))).toHaveLength(2);
  });

  it('a statement that fails fails alone: what its group wrote before it is committed and answered', async () => {
    const { calls, failing, db } = recorder();
    failing.add('INSERT bad');
    const before = db.query('INSERT good');
    const bad = db.query('INSERT bad');
    await expect(bad).rejects.toBeInstanceOf(StorageError);
    await expect(before).resolves.toEqual([{ text: 'INSERT good' }]);
    await turn();
    expect(calls.filter((c) => c === 'COMMIT')).toHaveLength(1);
  });

  it('close commits what is open first', async () => {
    const { calls, db } = recorder();
    const pending = db.query('INSERT a');
    await db.close();
    await expect(pending).resolves.toBeDefined();
    expect(calls.slice(-3)).toEqual(['INSERT a []', 'COMMIT', 'close']);
  });

  it('while another process holds the write lock, writes wait without holding the event loop and reads are answered', async () => {
    const { calls, lock, db } = recorder();
    lock.busy = true;
    const write = db.query('INSERT a');
    let written = false;
    void write.then(() => {
      written = true;
    });
    await expect(db.query('SELECT b')).resolves.toEqual([{ text: 'SELECT b' }]);
    // Tried again, and refused again: it waits (not given up, not written).
    await waitFor(() => lock.refused >= 2, { what: 'the write to be tried again' });
    expect(written).toBe(false);
    lock.busy = false;
    await expect(write).resolves.toEqual([{ text: 'INSERT a' }]);
    expect(calls.slice(-4)).toEqual(['SELECT b []', 'BEGIN IMMEDIATE', 'INSERT a []', 'COMMIT']);
  });

  it('a write still locked out after its wait fails as the store refusing it', async () => {
    const { lock, db } = recorder(100);
    lock.busy = true;
    await expect(db.query('INSERT a')).rejects.toThrow(/database is locked/);
    lock.busy = false;
    await expect(db.query('INSERT b')).resolves.toBeDefined();
  });

  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it.each(drivers)('on %s: 200 writes at once are all durable, and a reopen reads them', async (_, sqlite) => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-node-sqlite-'));
    dirs.push(dir);
    const file = join(dir, 'db.sqlite');
    const db = openNodeSqlite(sqlite, file, ['PRAGMA journal_mode=WAL', 'PRAGMA synchronous=FULL'], 5000);
    await db.query('CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)');
    await Promise.all(Array.from({ length: 200 }, (_, i) => db.query('INSERT INTO t VALUES (?, ?)', [`k${i}`, `v${i}`])));
    await expect(db.query('INSERT INTO t VALUES (?, ?)', ['k0', 'again'])).rejects.toBeInstanceOf(StorageError);
    await db.close();
    const again = openNodeSqlite(sqlite, file, [], 5000);
    expect(await again.query('SELECT count(*) AS n FROM t')).toEqual([{ n: 200 }]);
    await again.close();
  });

  it.each(drivers)('on %s: a write lock held by another connection is waited out, reads answered meanwhile', async (_, sqlite) => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-node-sqlite-'));
    dirs.push(dir);
    const file = join(dir, 'db.sqlite');
    const db = openNodeSqlite(sqlite, file, ['PRAGMA journal_mode=WAL'], 5000);
    await db.query('CREATE TABLE t (k TEXT PRIMARY KEY)');
    const other = new sqlite.DatabaseSync(file);
    other.exec('BEGIN IMMEDIATE');
    const write = db.query('INSERT INTO t VALUES (?)', ['mine']);
    expect(await db.query('SELECT count(*) AS n FROM t')).toEqual([{ n: 0 }]);
    other.exec('COMMIT');
    await write;
    expect(await db.query('SELECT k FROM t')).toEqual([{ k: 'mine' }]);
    other.close();
    await db.close();
  });
});
