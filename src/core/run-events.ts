import type { AgentEvent } from './agents/types';
import { clip } from './run-outcome';
import type { HeadlessStore } from './store';
import type { RunRecord, RunUsage } from './types';

/** A run's event timeline (README: Run events): kept per run, bounded, stored, and followed live. */

export const RUN_EVENT_TYPES = ['run.started', 'agent.session', 'message', 'tool', 'usage', 'error', 'run.ended'] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

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

const eventsKey = (taskId: string) => `events:${taskId}`;
/** Events handed to a reader at once. */
const BATCH = 100;
const TEXT_MAX = 4000;
const NAME_MAX = 200;

interface StoredTimeline {
  events: RunEvent[];
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

/** One run's timeline in memory: the retained events, and a signal for those waiting on the next. */
class Timeline {
  private sizes: number[] = [];
  private bytes = 0;
  private lastSeq: number;
  /** Readers waiting for the next change. */
  private readonly waiters = new Set<() => void>();
  /** Set when events were added since the store last took the timeline. */
  dirty = false;

  constructor(
    public events: RunEvent[],
    public ended: boolean,
    private readonly limits: { maxEvents: number; maxBytes: number },
  ) {
    this.sizes = events.map(sizeOf);
    this.bytes = this.sizes.reduce((a, b) => a + b, 0);
    this.lastSeq = events.at(-1)?.seq ?? 0;
  }

  private wake(): void {
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
    this.dirty = true;
    if (type === 'run.ended') this.ended = true;
    this.wake();
    return event;
  }

  /** Wakes every waiting reader without an event (used when the service closes). */
  release(): void {
    this.ended = true;
    this.wake();
  }

  page(after: number, limit: number): EventPage {
    // Sequence numbers are dense, so the first event after `after` is found by arithmetic.
    const first = this.events[0]?.seq ?? 1;
    const start = Math.max(0, after + 1 - first);
    const events = this.events.slice(start, start + limit);
    return { events, ended: this.ended && start + events.length >= this.events.length };
  }

  /** Settles at the next change, or after `ms`, or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }

  stored(): StoredTimeline {
    return { events: this.events, ended: this.ended };
  }
}

const sizeOf = (event: RunEvent) => Buffer.byteLength(JSON.stringify(event));

/**
 * The timelines: a running run's lives in memory (bounded) and is written to the store at
 * most every `flushMs` and when the run ends; an ended run's is read from the store.
 */
export class RunEvents {
  private readonly live = new Map<string, { timeline: Timeline; timer?: NodeJS.Timeout; writing: Promise<void> }>();
  private readonly limits: { maxEvents: number; maxBytes: number };
  private readonly flushMs: number;

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

  /** Ends a running run's timeline with its final record, and stores it. */
  async end(record: RunRecord): Promise<void> {
    const entry = this.live.get(record.taskId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.timeline.append('run.ended', record);
    await this.write(record.taskId);
    this.live.delete(record.taskId);
  }

  /** Ends the stored timeline of a run an earlier boot left running (crash recovery). */
  async endStored(record: RunRecord): Promise<void> {
    const stored = await this.o.store.get<StoredTimeline>(eventsKey(record.taskId));
    const timeline = new Timeline(stored?.events ?? [], false, this.limits);
    timeline.append('run.ended', record);
    await this.o.store.set(eventsKey(record.taskId), timeline.stored());
  }

  /** Writes a live timeline; writes of one run never overlap, so an older one never lands last. */
  private write(taskId: string): Promise<void> {
    const entry = this.live.get(taskId);
    if (!entry) return Promise.resolve();
    entry.writing = entry.writing.then(async () => {
      if (!entry.timeline.dirty) return;
      entry.timeline.dirty = false;
      try {
        await this.o.store.set(eventsKey(taskId), entry.timeline.stored());
      } catch (error) {
        this.o.log(`could not store the events of ${taskId}`, error);
      }
    });
    return entry.writing;
  }

  /** A page of a run's events after `after`. */
  async page(taskId: string, after: number, limit: number): Promise<EventPage> {
    const live = this.live.get(taskId);
    if (live) return live.timeline.page(after, limit);
    const stored = await this.o.store.get<StoredTimeline>(eventsKey(taskId));
    return new Timeline(stored?.events ?? [], true, this.limits).page(after, limit);
  }

  /** Follows a run's events after `after`: live while it runs, then to its end. */
  reader(taskId: string, after: number): EventReader {
    let cursor = after;
    const stop = new AbortController();
    const live = this.live.get(taskId)?.timeline;
    let stored: Promise<Timeline> | undefined;
    const timeline = async () =>
      live ?? (stored ??= this.o.store.get<StoredTimeline>(eventsKey(taskId)).then((t) => new Timeline(t?.events ?? [], true, this.limits)));
    return {
      async next(waitMs) {
        const source = await timeline();
        let page = source.page(cursor, BATCH);
        if (page.events.length === 0 && !page.ended && !stop.signal.aborted) {
          await source.wait(waitMs, stop.signal);
          page = source.page(cursor, BATCH);
        }
        if (stop.signal.aborted) return { events: [], ended: true };
        cursor = page.events.at(-1)?.seq ?? cursor;
        return page;
      },
      close: () => stop.abort(),
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
