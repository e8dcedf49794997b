import { StorageError } from '../../contract/problems';
import type pg from 'pg';
import type { SqlDatabase } from '../store/sql-database';

/**
 * Claims in a fleet (a busy Session, an idempotency key in flight): rows in `headless_claims`,
 * taken with `INSERT … ON CONFLICT DO NOTHING` and dropped with their owner when it is gone;
 * and exclusive sections, under a transaction's advisory lock.
 */

/** Takes `key` for `holder`; answers the holder that has it already, if one does. */
export async function claim(sql: SqlDatabase, owner: string, key: string, holder: string): Promise<string | undefined> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const taken = await sql.query('INSERT INTO headless_claims (key, holder, owner) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING RETURNING key', [
      key,
      holder,
      owner,
    ]);
    if (taken.length > 0) return undefined;
    const current = await holderOf(sql, key);
    // Released between the two statements: try again.
    if (current !== undefined) return current;
  }
  throw new StorageError(`could not claim ${key}: it is taken and released over and over`);
}

export async function release(sql: SqlDatabase, key: string, holder: string): Promise<void> {
  await sql.query('DELETE FROM headless_claims WHERE key = $1 AND holder = $2', [key, holder]);
}

export async function holderOf(sql: SqlDatabase, key: string): Promise<string | undefined> {
  return (await sql.query<{ holder: string }>('SELECT holder FROM headless_claims WHERE key = $1', [key]))[0]?.holder;
}

/** Runs `work` while no other instance runs work under the same `key` (the lock goes with the transaction). */
export async function exclusive<T>(pool: pg.Pool, key: string, work: () => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
    await client.query('BEGIN');
  } catch (error) {
    throw new StorageError(`store lock failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);
    return await work();
  } finally {
    // A broken connection is dropped from the pool.
    await client.query('COMMIT').then(
      () => client.release(),
      (error: Error) => client.release(error),
    );
  }
}
