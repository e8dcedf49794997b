import type { AgentEvent } from '../agents/types';
import { BoundedCache } from '../util/bounded-cache';
import { clip } from '../util/text';
import type { EventPage, RunEventData } from '../../contract/events';
import { Timeline } from './timeline';
import { deleteTimeline, loadTimeline, saveTimeline } from './timeline-store';
import type { TimelineWriter } from './timeline-writer';
import type { HeadlessStore } from '../store/keyv-store';
import { type RunEventType, type RunRecord, hasEnded } from '../../contract/records';

/** A run's event timeline (docs/http-api.md: Follow a run): kept per run, bounded, stored, and followed live. */

/** Follows one run's timeline from a sequence number on. */
export interface EventReader {
  /** The next events; waits up to `waitMs` for one (then answers none) unless the timeline has ended. */
  next(waitMs: number): Promise<EventPage>;
  /** Ends a pending `next` at once. */
  close(): void;
}

export interface RunEventsOptions {
  store: HeadlessStore;
  log: (message: string, error?: unknown) => void;
}

/** Events kept per run, and their bytes (as JSON): older ones are dropped. */
const MAX_EVENTS = 1000;
const MAX_BYTES = 1_048_576;
/** How often a running run's timeline is written to the store. */
const FLUSH_MS = 1000;
/** Stored timelines kept in memory, so readers arriving together read the store once. */
const STORED_CACHE = 16;
/**
 * How often the stored timeline of a run that runs on another instance is read again, for all
 * its readers at once. Its owner writes it at least every `flushMs`.
 */
const FOLLOW_POLL_MS = 500;
/** Events handed to a reader at once. */
const BATCH = 100;
const TEXT_MAX = 4000;
const NAME_MAX = 200;

type AgentEventOf<T extends AgentEvent['type']> = Extract<AgentEvent, { type: T }>;

/** An agent's event as a timeline entry, its strings bounded. */
export function fromAgentEvent(event: AgentEvent): { [T in AgentEvent['type']]: { type: T; data: RunEventData[T] } }[AgentEvent['type']] {
  const bound: { [T in AgentEvent['type']]: (e: AgentEventOf<T>) => RunEventData[T] } = {
    message: (e) => ({ text: clip(e.text, TEXT_MAX) }),
    error: (e) => ({ message: clip(e.message, TEXT_MAX) }),
    tool: (e) => ({ name: clip(e.name, NAME_MAX), status: e.status, ...(e.id === undefined ? {} : { id: clip(e.id, NAME_MAX) }) }),
    usage: (e) => e.usage,
  };
  return { type: event.type, data: (bound[event.type] as (e: AgentEvent) => never)(event) };
}

/**
 * The timelines: a running run's lives in memory (bounded) and is written to the store at
 * most every `flushMs` and when the run ends; an ended run's, or one running on another
 * instance, is read from the store.
 */
export class RunEvents implements TimelineWriter {
  private readonly live = new Map<string, { timeline: Timeline; timer?: NodeJS.Timeout; writing: Promise<void> }>();
  private readonly limits: { maxEvents: number; maxBytes: number };
  private readonly flushMs: number;
  private readonly stored = new BoundedCache<string, { loading: Promise<Timeline>; at: number; timeline?: Timeline }>(STORED_CACHE);

  constructor(private readonly o: RunEventsOptions) {
    this.limits = { maxEvents: MAX_EVENTS, maxBytes: MAX_BYTES };
    this.flushMs = FLUSH_MS;
  }

  /** Starts the timeline of an admitted run with `run.started` (after what a queued run's stored one holds). */
  open(data: RunEventData['run.started'], timeline = new Timeline([], false, this.limits)): void {
    this.live.set(data.taskId, { timeline, writing: Promise.resolve() });
    this.append(data.taskId, 'run.started', data);
  }

  /** Stores the timeline of a run accepted into the queue: `run.queued`, read from the store until the run starts. */
  async queued(data: RunEventData['run.queued']): Promise<void> {
    const timeline = new Timeline([], false, this.limits);
    timeline.append('run.queued', data);
    await saveTimeline(this.o.store, data.taskId, timeline);
  }

  /** Continues the stored timeline of a queued run this instance took, with `run.started`. */
  async resume(data: RunEventData['run.started']): Promise<void> {
    this.open(data, await loadTimeline(this.o.store, data.taskId, this.limits));
  }

  /** Forgets the timeline of a run that was never acknowledged. */
  discard(taskId: string): void {
    const entry = this.live.get(taskId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.timeline.release();
    this.live.delete(taskId);
  }

  /** Adds an event to a run running here; answers whether it was added (never after `run.ended`, which stays the last). */
  append<T extends RunEventType>(taskId: string, type: T, data: RunEventData[T]): boolean {
    const entry = this.live.get(taskId);
    if (!entry || entry.timeline.ended) return false;
    entry.timeline.append(type, data);
    entry.timer ??= setTimeout(() => {
      entry.timer = undefined;
      void this.write(taskId);
    }, this.flushMs);
    return true;
  }

  /**
   * Ends a run's timeline with its final record: one followed here at once (before it awaits),
   * then stored; any other (queued, or taken over from a gone instance) in the store.
   */
  async end(record: RunRecord): Promise<void> {
    const entry = this.live.get(record.taskId);
    if (!entry) return this.endStored(record);
    // Ended already (a reader saw the final record first): its write is under way.
    if (entry.timeline.ended) return entry.writing;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.timeline.append('run.ended', record);
    await this.write(record.taskId);
    this.stored.set(record.taskId, { loading: Promise.resolve(entry.timeline), at: Date.now(), timeline: entry.timeline });
    this.live.delete(record.taskId);
  }

  /** Ends a stored timeline, unless it has ended. */
  private async endStored(record: RunRecord): Promise<void> {
    const timeline = await loadTimeline(this.o.store, record.taskId, this.limits);
    if (timeline.ended) return;
    timeline.append('run.ended', record);
    await saveTimeline(this.o.store, record.taskId, timeline);
  }

  /** Deletes an ended run's stored timeline. */
  async forget(taskId: string): Promise<void> {
    await deleteTimeline(this.o.store, taskId);
    this.stored.delete(taskId);
  }

  /** Writes a live timeline; writes of one run never overlap, so an older one never lands last. */
  private write(taskId: string): Promise<void> {
    const entry = this.live.get(taskId);
    if (!entry) return Promise.resolve();
    entry.writing = entry.writing.then(async () => {
      try {
        await saveTimeline(this.o.store, taskId, entry.timeline);
      } catch (error) {
        this.o.log(`could not store the events of ${taskId}`, error);
      }
    });
    return entry.writing;
  }

  /** A page of a run's events after `after`; `record`: its record as read now. */
  async page(record: RunRecord, after: number, limit: number): Promise<EventPage> {
    const live = this.followRecord(record);
    return (live ?? (await this.fromStore(record))).page(after, limit);
  }

  /**
   * The live timeline of a run, ended at once if `record` (read before) says the run has ended:
   * the record is the truth, and its end is durable before the timeline is told.
   */
  private followRecord(record: RunRecord): Timeline | undefined {
    const live = this.live.get(record.taskId)?.timeline;
    if (live && !live.ended && hasEnded(record.status))
      void this.end(record).catch((error: unknown) => this.o.log(`could not end the events of ${record.taskId}`, error));
    return live;
  }

  /**
   * The stored timeline of a run this instance does not run (it has ended, or runs on another
   * instance): read once for all the readers that ask while it is cached, and again at most
   * every FOLLOW_POLL_MS while it has not ended.
   */
  private fromStore(record: RunRecord): Promise<Timeline> {
    const { taskId } = record;
    // The record is the truth: an ended run's timeline ends with it, even if its end was never
    // stored (a crash between the two), or was read, still running, a moment before.
    const endedBy = (timeline: Timeline): Timeline => {
      if (hasEnded(record.status) && !timeline.ended) timeline.append('run.ended', record);
      return timeline;
    };
    const cached = this.stored.get(taskId);
    if (cached && (!cached.timeline || cached.timeline.ended || Date.now() - cached.at < FOLLOW_POLL_MS)) return cached.loading.then(endedBy);
    const loading = loadTimeline(this.o.store, taskId, this.limits).then(endedBy);
    const entry: { loading: Promise<Timeline>; at: number; timeline?: Timeline } = { loading, at: Date.now() };
    entry.loading.then(
      (timeline) => {
        entry.timeline = timeline;
      },
      () => {
        if (this.stored.get(taskId) === entry) this.stored.delete(taskId);
      },
    );
    this.stored.set(taskId, entry);
    return entry.loading;
  }

  /** Follows a run's events after `after`: live while it runs (here, or on another instance), then to its end. */
  reader(record: RunRecord, after: number): EventReader {
    const { taskId } = record;
    this.followRecord(record);
    let cursor = after;
    let closed = false;
    // The pending wait, settled at once by close(): one function, no listeners to add and remove.
    let wake: (() => void) | undefined;
    const hold = (w: () => void) => {
      wake = w;
    };
    const pause = (ms: number) =>
      new Promise<void>((resolve) => {
        hold(resolve);
        setTimeout(resolve, ms);
      });
    const live = this.live.get(taskId)?.timeline;
    if (live) live.followers += 1;
    return {
      next: async (waitMs) => {
        let page: EventPage;
        if (live) {
          page = live.page(cursor, BATCH, live.published);
          if (page.events.length === 0 && !page.ended && !closed) {
            await live.wait(waitMs, hold);
            page = live.page(cursor, BATCH, live.published);
          }
        } else {
          page = (await this.fromStore(record)).page(cursor, BATCH);
          const until = Date.now() + waitMs;
          while (page.events.length === 0 && !page.ended && !closed && Date.now() < until) {
            await pause(Math.min(FOLLOW_POLL_MS, until - Date.now()));
            page = (await this.fromStore(record)).page(cursor, BATCH);
          }
        }
        wake = undefined;
        if (closed) return { events: [], ended: true };
        cursor = page.events.at(-1)?.seq ?? cursor;
        return page;
      },
      close: () => {
        if (!closed && live) live.followers -= 1;
        closed = true;
        wake?.();
      },
    };
  }

  /** Stores every live timeline and releases their readers: the service is closing. */
  async close(): Promise<void> {
    const taskIds = [...this.live.keys()];
    for (const id of taskIds) clearTimeout(this.live.get(id)?.timer);
    await Promise.all(taskIds.map((id) => this.write(id)));
    for (const id of taskIds) this.live.get(id)?.timeline.release();
  }
}
