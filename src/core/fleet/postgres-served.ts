import type { SqlDatabase } from '../store/sql-database';
import type { AdvertisedWorkspace } from './fleet';

/**
 * What each member of a fleet runs: a row per workspace and member in `headless_served`, holding
 * what it advertised; a row goes with its member's lease (the sweeper drops those of gone ones).
 */

/** Drops the rows of the members whose lease has run out, but those of `kept` (alive when the sweep began). */
export const DROP_GONE_SERVED =
  'DELETE FROM headless_served WHERE NOT (instance_id = ANY($1)) AND instance_id NOT IN (SELECT id FROM headless_instances WHERE expires_at >= now())';

export async function advertise(sql: SqlDatabase, instanceId: string, workspaces: AdvertisedWorkspace[]): Promise<void> {
  for (const ws of workspaces) {
    await sql.query(
      'INSERT INTO headless_served (workspace_id, instance_id, definition) VALUES ($1, $2, $3) ON CONFLICT (workspace_id, instance_id) DO UPDATE SET definition = excluded.definition',
      [ws.id, instanceId, JSON.stringify(ws)],
    );
  }
}

/** What the newest living member advertised of workspace `id`, as the table holds it: whoever reads it checks it (workspaces.ts). */
export async function advertised(sql: SqlDatabase, id: string): Promise<AdvertisedWorkspace | undefined> {
  const rows = await sql.query<{ definition: unknown }>(
    'SELECT s.definition FROM headless_served s JOIN headless_instances i ON i.id = s.instance_id WHERE s.workspace_id = $1 AND i.expires_at >= now() ORDER BY s.instance_id DESC LIMIT 1',
    [id],
  );
  return rows[0]?.definition as AdvertisedWorkspace | undefined;
}

export async function withdraw(sql: SqlDatabase, instanceId: string): Promise<void> {
  await sql.query('DELETE FROM headless_served WHERE instance_id = $1', [instanceId]);
}
