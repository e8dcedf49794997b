import type { RunRecord, RunStatus } from '../../contract/records';
import { publicRecord, sourceOf } from '../public-record';
import type { StoredRun } from '../types';
import type { RunRecords } from './records';

/** The schedule or trigger a run came from, if one did. */
const originOf = (r: StoredRun, kind: 'schedule' | 'trigger') => {
  const source = sourceOf(r);
  return source.kind === kind ? source.name : undefined;
};

/** A filtered list reads at most this many runs for one page; the cursor goes on from where it stopped. */
const FILTER_SCAN_MAX = 2000;

export interface ListQuery {
  workspaceId: string;
  status?: RunStatus;
  limit: number;
  cursor?: string;
  /** Only runs whose metadata has this key with this value. */
  metadata?: { key: string; value: string };
  /** Only runs this schedule started. */
  schedule?: string;
  /** Only runs this trigger started. */
  trigger?: string;
  /** Only runs of this agent. */
  agent?: string;
}

/**
 * A page of a workspace's runs, newest first (docs/http-api.md: List runs). Status comes from the
 * lookups; a metadata filter is applied to the records read, page after page, up to
 * FILTER_SCAN_MAX runs: such a page may hold fewer than `limit` runs, even none, with a cursor
 * that goes on.
 */
export async function listRuns(records: RunRecords, q: ListQuery) {
  const shown: RunRecord[] = [];
  const fits = (r: StoredRun | undefined): r is StoredRun =>
    r !== undefined &&
    (q.status === undefined || r.status === q.status) &&
    (!q.metadata || r.metadata?.[q.metadata.key] === q.metadata.value) &&
    (q.schedule === undefined || originOf(r, 'schedule') === q.schedule) &&
    (q.trigger === undefined || originOf(r, 'trigger') === q.trigger) &&
    (q.agent === undefined || r.agent === q.agent);
  const filtered = q.metadata !== undefined || q.schedule !== undefined || q.trigger !== undefined || q.agent !== undefined;
  let cursor = q.cursor;
  for (let scanned = 0; ; ) {
    const page = await records.page(q.workspaceId, q.status, q.limit, cursor);
    // A record read after its lookup may have changed state since: the list shows what it is now.
    const runs = await records.findMany(page.ids);
    for (const [i, run] of runs.entries()) {
      if (fits(run)) shown.push(publicRecord(run));
      const more = i + 1 < runs.length || page.next !== null;
      if (shown.length === q.limit || (filtered && ++scanned >= FILTER_SCAN_MAX)) return { runs: shown, nextCursor: more ? (page.ids[i] ?? null) : null };
    }
    if (!filtered || page.next === null) return { runs: shown, nextCursor: page.next };
    cursor = page.next;
  }
}
