import type { Fleet } from './fleet/fleet';
import { newSortableId, sha256 } from './util/ids';
import { Refusal } from '../contract/problems';
import type { HeadlessStore } from './store/keyv-store';

/**
 * Idempotent operations that make a run, after the IETF draft "The Idempotency-Key HTTP Header
 * Field" and Stripe: the first call with a key runs; a retry with the same request gets the first
 * answer without running anything; the same key with another request is 422; a retry while the
 * first is still running is 409. An answer is kept only when the call started something (a run
 * record exists); a call refused before that leaves no trace, so the same key may be retried.
 * Keys are kept for 24 hours (or a caller's window) and survive a restart with the store. A key in
 * flight is a claim in the fleet, so of simultaneous retries sent to several instances one goes on.
 * What an answer is belongs to its caller (an HTTP start, a schedule's firing, a trigger's delivery).
 */

/** What one idempotent operation does, and how its answer is found again. */
export interface Once<T> {
  /** Does it, with the run id it must use; throws (a Refusal) to refuse. */
  execute(taskId: string): Promise<T>;
  /** The answer of a call cut off before its answer was kept, from its run; undefined when it made none. */
  replay(taskId: string): Promise<T | undefined>;
  /** What a refusal that recorded its run (it names its `taskId`) keeps for retries; absent: its run answers them. */
  refused?(refusal: Refusal, taskId: string): T;
  /** Reads an answer kept before version 2; absent, or undefined: its run answers, as for a call cut off. */
  fromV1?(answer: AnswerV1): T | undefined;
}

/** What every entry kept before version 2: the HTTP answer of the first call, schedules' and triggers' too. */
export interface AnswerV1 {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** The version of an entry whose `answer` is its caller's own. */
const VERSION = 2;

interface Entry {
  /** 2; absent: stored before version 2, its `answer` an `AnswerV1`. */
  version?: typeof VERSION;
  fingerprint: string;
  /** `pending` while the first call runs, or if the service died before it answered. */
  state: 'pending' | 'done';
  /** The run the first call makes (planned before it starts). */
  taskId?: string;
  answer?: unknown;
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
   * Runs `how.execute` at most once for `key` within `scope`, with the run id it must use: the key
   * is bound to that run before it starts, so a call cut off by a crash is answered from its run
   * (`how.replay`), and one that never made a run frees its key. A retry must repeat `request`
   * (only its fingerprint is kept). `ttlMs`: how long the key is kept (24 hours by default).
   */
  async once<T>(scope: string, key: string, request: unknown, how: Once<T>, ttlMs = IDEMPOTENCY_TTL_MS): Promise<{ answer: T; replayed: boolean }> {
    if (!KEY.test(key)) throw new Refusal('invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
    const id = `idem:${sha256(`${scope}\0${key}`)}`;
    const fingerprint = sha256(canonical(request));
    const running = await this.fleet.claim(id, fingerprint);
    if (running !== undefined) throw running === fingerprint ? inUse() : reused();
    try {
      const entry = await this.store.get<Entry>(id);
      if (entry && entry.fingerprint !== fingerprint) throw reused();
      const kept = await answerOf(entry, how);
      if (kept !== undefined) return { answer: kept, replayed: true };
      return { answer: await this.first(id, fingerprint, how, ttlMs), replayed: false };
    } finally {
      await this.fleet.release(id, fingerprint).catch((e: unknown) => this.log('could not release an idempotency key', e));
    }
  }

  /** The first call: its key bound to the run it will make, then its answer kept (or its key freed, if it made none). */
  private async first<T>(id: string, fingerprint: string, how: Once<T>, ttlMs: number): Promise<T> {
    const taskId = newSortableId('run_');
    const kept = ttlMs === IDEMPOTENCY_TTL_MS ? {} : { ttlMs };
    const pending: Entry = { version: VERSION, fingerprint, state: 'pending', taskId, createdAt: new Date().toISOString(), ...kept };
    await this.store.set(id, pending, ttlMs);
    let answer: T;
    try {
      answer = await how.execute(taskId);
    } catch (error) {
      const refused = error instanceof Refusal && typeof error.extra.taskId === 'string' ? how.refused?.(error, error.extra.taskId) : undefined;
      if (refused !== undefined) await this.keep(id, { ...pending, state: 'done', answer: refused });
      else if ((await how.replay(taskId).catch(() => undefined)) === undefined) {
        // No run was made: the key is free again.
        await this.store.delete(id).catch((e: unknown) => this.log('could not release an idempotency key', e));
      }
      throw error;
    }
    await this.keep(id, { ...pending, state: 'done', answer });
    return answer;
  }

  /** Keeps the answer; if the store refuses, retries are answered from the run, never a second run. */
  private async keep(id: string, entry: Entry): Promise<void> {
    await this.store
      .set(id, entry, entry.ttlMs ?? IDEMPOTENCY_TTL_MS)
      .catch((e: unknown) => this.log('could not store the answer of an idempotent request', e));
  }
}

/** The answer an entry keeps, read by its version; or, its call cut off (pending and unclaimed), its run's if it made one. */
async function answerOf<T>(entry: Entry | undefined, how: Once<T>): Promise<T | undefined> {
  if (entry?.state === 'done' && entry.answer !== undefined) {
    const kept = entry.version === VERSION ? (entry.answer as T) : how.fromV1?.(entry.answer as AnswerV1);
    if (kept !== undefined) return kept;
  }
  return entry?.taskId === undefined ? undefined : how.replay(entry.taskId);
}

const inUse = () => new Refusal('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry once it has been answered.');
const reused = () => new Refusal('idempotency_key_reused', 'This Idempotency-Key was used with another request body.');
