import { StorageError } from '../../contract/problems';
import type { SqlAccess } from '../store/keyv-store';

/**
 * Claims in a fleet (a busy Session, an idempotency key in flight): rows in `headless_claims`,
 * taken with `INSERT … ON CONFLICT DO NOTHING` and dropped with their owner when it is gone.
 */

/** Takes `key` for `holder`; answers the holder that has it already, if one does. */
export async function claim(sql: SqlAccess, owner: string, key: string, holder: string): Promise<string | undefined> {
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

export async function release(sql: SqlAccess, key: string, holder: string): Promise<void> {
  await sql.query('DELETE FROM headless_claims WHERE key = $1 AND holder = $2', [key, holder]);
}

export async function holderOf(sql: SqlAccess, key: string): Promise<string | undefined> {
  return (await sql.query<{ holder: string }>('SELECT holder FROM headless_claims WHERE key = $1', [key]))[0]?.holder;
}
