import type { RunEvent } from '../../contract/events';
import type { HeadlessStore } from '../store/keyv-store';
import { SEGMENT, Timeline } from './timeline';

/**
 * Stored as a head (`events:<taskId>`: the first and last kept sequence numbers) and segments of
 * `SEGMENT` events (`events:<taskId>:<n>`), so a write costs the new events, not the timeline.
 */
export const headKey = (taskId: string) => `events:${taskId}`;
const segmentKey = (taskId: string, n: number) => `events:${taskId}:${n}`;
const segmentOf = (seq: number) => Math.floor((seq - 1) / SEGMENT);

export interface StoredHead {
  first: number;
  last: number;
  ended: boolean;
}

/** A stored timeline; none stored is an empty one, not ended (its record says whether its run has). */
export async function loadTimeline(store: HeadlessStore, taskId: string, limits: Timeline['limits']): Promise<Timeline> {
  const head = await store.get<StoredHead>(headKey(taskId));
  if (!head || head.last < head.first) return new Timeline([], false, limits);
  const keys: string[] = [];
  for (let n = segmentOf(head.first); n <= segmentOf(head.last); n++) keys.push(segmentKey(taskId, n));
  const events = (await store.getMany<RunEvent[]>(keys)).flatMap((segment) => segment ?? []).filter((e) => e.seq >= head.first && e.seq <= head.last);
  const timeline = new Timeline(events, head.ended, limits);
  timeline.saved = { first: head.first, last: head.last };
  return timeline;
}

/** Writes the segments with new events, drops those left behind, then the head. */
export async function saveTimeline(store: HeadlessStore, taskId: string, timeline: Timeline): Promise<void> {
  const { firstSeq: first, lastSeq: last, saved, ended } = timeline;
  if (last === saved.last && first === saved.first) return;
  const writes: Promise<void>[] = [];
  for (let n = segmentOf(Math.max(saved.last + 1, first)); n <= segmentOf(last); n++) writes.push(store.set(segmentKey(taskId, n), timeline.segment(n)));
  if (saved.last > 0) {
    for (let n = segmentOf(saved.first); n < Math.min(segmentOf(first), segmentOf(saved.last) + 1); n++) writes.push(store.delete(segmentKey(taskId, n)));
  }
  await Promise.all(writes);
  await store.set(headKey(taskId), { first, last, ended } satisfies StoredHead);
  timeline.saved = { first, last };
}

/** Deletes a stored timeline. */
export async function deleteTimeline(store: HeadlessStore, taskId: string): Promise<void> {
  const head = await store.get<StoredHead>(headKey(taskId));
  if (head) for (let n = segmentOf(head.first); n <= segmentOf(head.last); n++) await store.delete(segmentKey(taskId, n));
  await store.delete(headKey(taskId));
}
