import type { Fleet } from './fleet/fleet';
import { newSortableId, sha256 } from './util/ids';
import { Refusal, problemAnswer } from '../contract/problems';
import type { HeadlessStore } from './store/keyv-store';

/**
 * Idempotent starts, after the IETF draft "The Idempotency-Key HTTP Header Field" and Stripe:
 * the first request with a key runs; a retry with the same body gets the first answer (same
 * status, body and Location) without running anything; the same key with another body is 422;
 * a retry while the first is still running is 409. An answer is kept only when the request
 * started something (a run record exists); a request refused before that (400, 404, 409, 429,
 * 503) leaves no trace, so the same key may be retried. Keys are kept for 24 hours and survive a
 * restart with the store. A key in flight is a claim in the fleet, so of simultaneous retries sent
 * to several instances one goes on.
 */

/** A replayable answer: what the first request got. */
export interface StoredAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

interface Entry {
  fingerprint: string;
  /** `pending` while the first request runs, or if the service died before it answered. */
  state: 'pending' | 'done';
  /** The run the first request makes (planned before it starts). */
  taskId?: string;
  answer?: StoredAnswer;
  createdAt: string;
  /** How long it is kept, where not the default (a trigger's dedupe window). */
  ttlMs?: number;
}

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** Printable ASCII, as the draft's sf-string, bounded. */
const KEY = /^[\x20-\x7e]{1,255}$/;

/** A canonical JSON text of a body: the same fields and values give the same text in any order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export class IdempotencyKeys {
  constructor(
    private readonly store: HeadlessStore,
    /** Holds the keys whose first request is running, with its body's fingerprint. */
    private readonly fleet: Fleet,
    private readonly log: (message: string, error?: unknown) => void,
  ) {}

  /** Deletes the keys that have expired (Keyv hides them, but SQL stores keep their rows); returns how many. */
  async prune(now: number): Promise<number> {
    let count = 0;
    for await (const [id, entry] of this.store.scan<Entry>('idem:')) {
      if (Date.parse(entry.createdAt) + (entry.ttlMs ?? IDEMPOTENCY_TTL_MS) < now && (await this.fleet.holder(id)) === undefined) {
        await this.store.delete(id);
        count++;
      }
    }
    return count;
  }

  /**
   * Runs `execute` at most once for `key` within `scope`, with the run id it must use: the key is
   * bound to that run before it starts, so a request cut off by a crash is answered from its run
   * (`replay`), and one that never made a run frees its key. `execute` returns the answer, or
   * throws a Refusal; one carrying a `taskId` (a run was recorded) is kept and replayed too.
   */
  async run(
    scope: string,
    key: string,
    body: unknown,
    execute: (taskId: string) => Promise<StoredAnswer>,
    replay: (taskId: string) => Promise<StoredAnswer | undefined>,
    /** How long the key is kept. @default 24 hours */
    ttlMs = IDEMPOTENCY_TTL_MS,
  ): Promise<{ answer: StoredAnswer; replayed: boolean }> {
    if (!KEY.test(key)) throw new Refusal('invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
    const id = `idem:${sha256(`${scope}\0${key}`)}`;
    const fingerprint = sha256(canonical(body));
    const running = await this.fleet.claim(id, fingerprint);
    if (running !== undefined) throw running === fingerprint ? inUse() : reused();
    try {
      const entry = await this.store.get<Entry>(id);
      if (entry && entry.fingerprint !== fingerprint) throw reused();
      if (entry?.state === 'done' && entry.answer) return { answer: entry.answer, replayed: true };
      // Pending and unclaimed: its request was cut off. Its run answers, if it was made.
      const cutOff = entry?.taskId === undefined ? undefined : await replay(entry.taskId);
      if (cutOff) return { answer: cutOff, replayed: true };
      const taskId = newSortableId('run_');
      const createdAt = new Date().toISOString();
      const kept = ttlMs === IDEMPOTENCY_TTL_MS ? {} : { ttlMs };
      await this.store.set(id, { fingerprint, state: 'pending', taskId, createdAt, ...kept } satisfies Entry, ttlMs);
      let answer: StoredAnswer;
      try {
        answer = await execute(taskId);
      } catch (error) {
        if (error instanceof Refusal && typeof error.extra.taskId === 'string') {
          await this.keep(id, { fingerprint, state: 'done', taskId, createdAt, ...kept, answer: problemAnswer(error) });
        } else if ((await replay(taskId).catch(() => undefined)) === undefined) {
          // No run was made: the key is free again.
          await this.store.delete(id).catch((e: unknown) => this.log('could not release an idempotency key', e));
        }
        throw error;
      }
      await this.keep(id, { fingerprint, state: 'done', taskId, createdAt, ...kept, answer });
      return { answer, replayed: false };
    } finally {
      await this.fleet.release(id, fingerprint).catch((e: unknown) => this.log('could not release an idempotency key', e));
    }
  }

  /** Stores the answer; if the store refuses, retries are answered from the run, never a second run. */
  private async keep(id: string, entry: Entry): Promise<void> {
    await this.store
      .set(id, entry, entry.ttlMs ?? IDEMPOTENCY_TTL_MS)
      .catch((e: unknown) => this.log('could not store the answer of an idempotent request', e));
  }
}

const inUse = () => new Refusal('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry once it has been answered.');
const reused = () => new Refusal('idempotency_key_reused', 'This Idempotency-Key was used with another request body.');
