/**
 * @module A workspace's runs accepted since a time, newest first, read a page of ids and then its
 * records at once: what the daily limits and the usage report sum. A run belongs to the UTC day
 * of its id (made when it was accepted), so both count a run on the same day.
 */
import type { StoredRun } from '../types';
import { sortableIdBound } from '../util/ids';
import type { RunRecords } from './records';

export const DAY_MS = 86_400_000;

/** The start of the UTC day `time` is in. */
export const dayStart = (time: number) => Math.floor(time / DAY_MS) * DAY_MS;

/** `YYYY-MM-DD` of the UTC day starting at `start`. */
export const dayName = (start: number) => new Date(start).toISOString().slice(0, 10);

/** The first id of a run accepted at or after `time`. */
export const runBound = (time: number) => sortableIdBound('run_', time);

const PAGE = 500;

/**
 * Every run of a workspace accepted at or after `since`, newest first. `stored`: the pages are
 * read from the store, never kept ones (a decision, such as a daily limit, reads what is stored).
 */
export async function* runsSince(records: RunRecords, workspaceId: string, since: number, o: { stored?: boolean } = {}): AsyncGenerator<StoredRun> {
  const bound = runBound(since);
  for (let cursor: string | undefined; ; ) {
    const page = await records.page(workspaceId, undefined, PAGE, cursor, o);
    const ids = page.ids.filter((id) => id >= bound);
    for (const run of await records.findMany(ids)) if (run) yield run;
    if (ids.length < page.ids.length || page.next === null) return;
    cursor = page.next;
  }
}
