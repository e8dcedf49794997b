import type { EventPage, RunEvent, RunEventData } from '../../contract/events';
import type { RunEventType } from '../../contract/records';

/** Events per stored segment (events/timeline-store.ts). */
export const SEGMENT = 100;
/** Followers of a running run with many followers are handed its new events at most this often. */
const READER_INTERVAL_MS = 100;
/** Up to this many followers are handed each event at once. */
const FEW_FOLLOWERS = 8;

/**
 * One run's timeline in memory: the retained events, and a signal for those waiting on the next.
 * A run with few followers hands them each event at once. With more, they are handed new events at
 * most every READER_INTERVAL_MS (the first after a quiet spell at once), all at the same moment: a
 * busy run costs each a few wake-ups a second, and followers in step read the same batches,
 * encoded once.
 */
export class Timeline {
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
  /** Readers following it now (waiting or not). */
  followers = 0;
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
    const wait = this.followers <= FEW_FOLLOWERS ? 0 : this.lastPublished + READER_INTERVAL_MS - Date.now();
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
      this.bytes -= this.sizes.shift() ?? 0;
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

const sizeOf = (event: RunEvent) => Buffer.byteLength(JSON.stringify(event));
