import type { AgentEvent } from './agents/types';
import { BoundedCache } from './bounded-cache';
import { clip } from './run-outcome';
import type { HeadlessStore } from './store';
import type { RunEventType, RunRecord, RunUsage } from './types';

/** A run's event timeline (README: Run events): kept per run, bounded, stored, and followed live. */


export interface RunEventData {
  'run.started': Pick<RunRecord, 'taskId' | 'resumeId' | 'workspaceId' | 'agent' | 'mode'>;
  /** The Session can now be resumed. The agent's own session id is never shown. */
  'agent.session': { resumeId: string };
  message: { text: string };
  tool: { name: string; status: 'started' | 'succeeded' | 'failed'; id?: string };
  usage: RunUsage;
  error: { message: string };
  /** The final record. */
  'run.ended': RunRecord;
}

/** One event: `seq` counts from 1 within its run. */
export type RunEvent = {
  [T in RunEventType]: { seq: number; time: string; type: T; data: RunEventData[T] };
}[RunEventType];

/** What is read from a timeline at once: events after a sequence number, and whether more can come. */
export interface EventPage {
  events: RunEvent[];
  /** No event will follow these: the run has ended (or its timeline is not followed here). */
  ended: boolean;
}

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
  /** Events kept per run; older ones are dropped. @default 1000 */
  maxEvents?: number;
  /** Bytes (as JSON) kept per run; older events are dropped. @default 1 MiB */
  maxBytes?: number;
  /** How often a running run's timeline is written to the store. @default 1000 */
  flushMs?: number;
}

/**
 * Stored as a head (`events:<taskId>`: the first and last kept sequence numbers) and segments of
 * `SEGMENT` events (`events:<taskId>:<n>`), so a write costs the new events, not the timeline.
 */
const SEGMENT = 100;
const headKey = (taskId: string) => `events:${taskId}`;
const segmentKey = (taskId: string, n: number) => `events:${taskId}:${n}`;
const segmentOf = (seq: number) => Math.floor((seq - 1) / SEGMENT);
/** Stored timelines kept in memory, so readers arriving together read the store once. */
const STORED_CACHE = 16;
/**
 * How often the stored timeline of a run that runs on another instance is read again, for all
 * its readers at once. Its owner writes it at least every `flushMs`.
 */
const FOLLOW_POLL_MS = 500;
/** Events handed to a reader at once. */
const BATCH = 100;
/** Followers of a running run are handed its new events at most this often. */
const READER_INTERVAL_MS = 100;
const TEXT_MAX = 4000;
const NAME_MAX = 200;

interface StoredHead {
  first: number;
  last: number;
  ended: boolean;
}

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
 * One run's timeline in memory: the retained events, and a signal for those waiting on the next.
 * Followers are handed new events at most every READER_INTERVAL_MS (the first after a quiet spell
 * at once), all at the same moment: a busy run costs each a few wake-ups a second, and followers
 * in step read the same batches, encoded once.
 */
class Timeline {
  private sizes: number[] = [];
  private bytes = 0;
  lastSeq: number;
  /** The last event followers have been handed. */
  published: number;
  private lastPublished = 0;
  private publishing: NodeJS.Timeout | undefined;
  private beat: NodeJS.Timeout | undefined;
  /** Readers waiting for the next change. */
  private readonly waiters = new Set<() => void>();
  /** The sequence numbers the store holds (0, 0: none yet). */
  saved = { first: 0, last: 0 };

  constructor(
    public events: RunEvent[],
    public ended: boolean,
    readonly limits: { maxEvents: number; maxBytes: number },
  ) {
    this.sizes = events.map(sizeOf);
    this.bytes = this.sizes.reduce((a, b) => a + b, 0);
    this.lastSeq = events.at(-1)?.seq ?? 0;
    this.published = this.lastSeq;
  }

  /** Hands the new events to the followers: now, or when the interval since the last time is over. */
  private wake(): void {
    if (this.publishing) return;
    const wait = this.lastPublished + READER_INTERVAL_MS - Date.now();
    if (wait <= 0) this.publish();
    else this.publishing = setTimeout(() => this.publish(), wait);
  }

  private publish(): void {
    clearTimeout(this.publishing);
    this.publishing = undefined;
    this.published = this.lastSeq;
    this.lastPublished = Date.now();
    for (const waiter of [...this.waiters]) waiter();
  }

  append<T extends RunEventType>(type: T, data: RunEventData[T]): RunEvent {
    const event = { seq: ++this.lastSeq, time: new Date().toISOString(), type, data } as RunEvent;
    const size = sizeOf(event);
    this.events.push(event);
    this.sizes.push(size);
    this.bytes += size;
    // The final event always stays, so a reader always learns how the run ended.
    while (this.events.length > 1 && (this.events.length > this.limits.maxEvents || this.bytes > this.limits.maxBytes)) {
      this.events.shift();
      this.bytes -= this.sizes.shift()!;
    }
    if (type === 'run.ended') {
      // The end is told at once.
      this.ended = true;
      this.publish();
    } else this.wake();
    return event;
  }

  /** Wakes every waiting reader without an event (used when the service closes). */
  release(): void {
    this.ended = true;
    this.publish();
  }

  /** Up to `limit` events after `after`, none after `upTo`. */
  page(after: number, limit: number, upTo = this.lastSeq): EventPage {
    // Sequence numbers are dense, so the first event after `after` is found by arithmetic.
    const first = this.events[0]?.seq ?? 1;
    const start = Math.max(0, after + 1 - first);
    const end = Math.max(start, Math.min(start + limit, upTo + 1 - first));
    const events = this.events.slice(start, end);
    return { events, ended: this.ended && upTo >= this.lastSeq && end >= this.events.length };
  }

  /**
   * Settles at the next change, or when the waiters' common beat (every `ms`, the keep-alive
   * interval) comes; `hold` receives the function that settles it now. One timer for all the
   * waiters of a run, not one each.
   */
  wait(ms: number, hold: (wake: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        if (this.waiters.size === 0) {
          clearInterval(this.beat);
          this.beat = undefined;
        }
        resolve();
      };
      this.waiters.add(done);
      hold(done);
      this.beat ??= setInterval(() => {
        for (const waiter of [...this.waiters]) waiter();
      }, ms);
    });
  }

  get firstSeq(): number {
    return this.events[0]?.seq ?? this.lastSeq + 1;
  }

  /** The kept events of segment `n`. */
  segment(n: number): RunEvent[] {
    const start = Math.max(0, n * SEGMENT + 1 - this.firstSeq);
    return this.events.slice(start, Math.max(0, (n + 1) * SEGMENT + 1 - this.firstSeq));
  }
}

/** A stored timeline; none stored yet is an empty one, ended unless its run is `running`. */
async function loadTimeline(store: HeadlessStore, taskId: string, limits: Timeline['limits'], running: boolean): Promise<Timeline> {
  const head = await store.get<StoredHead>(headKey(taskId));
  if (!head || head.last < head.first) return new Timeline([], !running, limits);
  const keys: string[] = [];
  for (let n = segmentOf(head.first); n <= segmentOf(head.last); n++) keys.push(segmentKey(taskId, n));
  const events = (await store.getMany<RunEvent[]>(keys)).flatMap((segment) => segment ?? []).filter((e) => e.seq >= head.first && e.seq <= head.last);
  const timeline = new Timeline(events, head.ended, limits);
  timeline.saved = { first: head.first, last: head.last };
  return timeline;
}

/** Writes the segments with new events, drops those left behind, then the head. */
async function saveTimeline(store: HeadlessStore, taskId: string, timeline: Timeline): Promise<void> {
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

const sizeOf = (event: RunEvent) => Buffer.byteLength(JSON.stringify(event));

/**
 * The timelines: a running run's lives in memory (bounded) and is written to the store at
 * most every `flushMs` and when the run ends; an ended run's, or one running on another
 * instance, is read from the store.
 */
export class RunEvents {
  private readonly live = new Map<string, { timeline: Timeline; timer?: NodeJS.Timeout; writing: Promise<void> }>();
  private readonly limits: { maxEvents: number; maxBytes: number };
  private readonly flushMs: number;
  private readonly stored = new BoundedCache<string, { loading: Promise<Timeline>; at: number; timeline?: Timeline }>(STORED_CACHE);

  constructor(private readonly o: RunEventsOptions) {
    this.limits = { maxEvents: o.maxEvents ?? 1000, maxBytes: o.maxBytes ?? 1_048_576 };
    this.flushMs = o.flushMs ?? 1000;
  }

  /** Starts the timeline of an admitted run with `run.started`. */
  open(data: RunEventData['run.started']): void {
    const timeline = new Timeline([], false, this.limits);
    this.live.set(data.taskId, { timeline, writing: Promise.resolve() });
    this.append(data.taskId, 'run.started', data);
  }

  /** Forgets the timeline of a run that was never acknowledged. */
  discard(taskId: string): void {
    const entry = this.live.get(taskId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.timeline.release();
    this.live.delete(taskId);
  }

  append<T extends RunEventType>(taskId: string, type: T, data: RunEventData[T]): void {
    const entry = this.live.get(taskId);
    if (!entry || entry.timeline.ended) return;
    entry.timeline.append(type, data);
    entry.timer ??= setTimeout(() => {
      entry.timer = undefined;
      void this.write(taskId);
    }, this.flushMs);
  }

  /** Ends a running run's timeline with its final record at once (before it awaits), then stores it. */
  async end(record: RunRecord): Promise<void> {
    const entry = this.live.get(record.taskId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.timeline.append('run.ended', record);
    await this.write(record.taskId);
    this.stored.set(record.taskId, { loading: Promise.resolve(entry.timeline), at: Date.now(), timeline: entry.timeline });
    this.live.delete(record.taskId);
  }

  /** Ends the stored timeline of a run taken over from a gone instance, unless it has ended. */
  async endStored(record: RunRecord): Promise<void> {
    const timeline = await loadTimeline(this.o.store, record.taskId, this.limits, true);
    if (timeline.ended) return;
    timeline.append('run.ended', record);
    await saveTimeline(this.o.store, record.taskId, timeline);
  }

  /** Deletes an ended run's stored timeline. */
  async forget(taskId: string): Promise<void> {
    const head = await this.o.store.get<StoredHead>(headKey(taskId));
    if (head) for (let n = segmentOf(head.first); n <= segmentOf(head.last); n++) await this.o.store.delete(segmentKey(taskId, n));
    await this.o.store.delete(headKey(taskId));
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

  /** A page of a run's events after `after`; `running`: what its record says. */
  async page(taskId: string, after: number, limit: number, running: boolean): Promise<EventPage> {
    const live = this.live.get(taskId);
    return (live?.timeline ?? (await this.fromStore(taskId, running))).page(after, limit);
  }

  /**
   * The stored timeline of a run this instance does not run (it has ended, or runs on another
   * instance): read once for all the readers that ask while it is cached, and again at most
   * every FOLLOW_POLL_MS while it has not ended.
   */
  private fromStore(taskId: string, running: boolean): Promise<Timeline> {
    const cached = this.stored.get(taskId);
    if (cached && (!cached.timeline || cached.timeline.ended || Date.now() - cached.at < FOLLOW_POLL_MS)) return cached.loading;
    const entry: { loading: Promise<Timeline>; at: number; timeline?: Timeline } = { loading: loadTimeline(this.o.store, taskId, this.limits, running), at: Date.now() };
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
  reader(taskId: string, after: number, running: boolean): EventReader {
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
          page = (await this.fromStore(taskId, running)).page(cursor, BATCH);
          const until = Date.now() + waitMs;
          while (page.events.length === 0 && !page.ended && !closed && Date.now() < until) {
            await pause(Math.min(FOLLOW_POLL_MS, until - Date.now()));
            page = (await this.fromStore(taskId, running)).page(cursor, BATCH);
          }
        }
        wake = undefined;
        if (closed) return { events: [], ended: true };
        cursor = page.events.at(-1)?.seq ?? cursor;
        return page;
      },
      close: () => {
        closed = true;
        wake?.();
      },
    };
  }

  /** Stores every live timeline and releases their readers: the service is closing. */
  async close(): Promise<void> {
    const taskIds = [...this.live.keys()];
    for (const id of taskIds) clearTimeout(this.live.get(id)!.timer);
    await Promise.all(taskIds.map((id) => this.write(id)));
    for (const id of taskIds) this.live.get(id)?.timeline.release();
  }
}
