import { Keyv } from 'keyv';

/** One write (set or delete) the service made: its key, without the namespace, and what it wrote. */
export interface Write {
  key: string;
  value?: Record<string, unknown>;
}

/** What a faulty store is told: the write(s) to refuse, one to hold; and what it saw. */
export interface Faults {
  /** Picks the write(s) to refuse (as SQLite does on a full disk, by throwing). */
  refuse?: (write: Write) => boolean;
  /** May keep a write waiting (a slow disk, a busy machine). */
  hold?: (write: Write) => Promise<void> | undefined;
  /** Every write, refused or not. */
  writes: Write[];
  refused: Write[];
}

/** Logs `write`, and throws what `refusal` makes if the faults refuse it. */
export function attempt(faults: Faults, write: Write, refusal: (message: string) => Error): void {
  faults.writes.push(write);
  if (faults.refuse?.(write)) {
    faults.refused.push(write);
    throw refusal('SQLITE_FULL: database or disk is full (fault injected)');
  }
}

/** `value` as a write logs it: an object's fields, nothing for anything else. */
export const written = (value: unknown): Pick<Write, 'value'> =>
  value && typeof value === 'object' && !Array.isArray(value) ? { value: value as Record<string, unknown> } : {};

/**
 * A Keyv store over a Map that can refuse chosen writes, for the fault-injection tier (`Faults`).
 * The Map outlives the service, so a new one can start on what the old one left, as after a restart.
 */
export function faultyKeyv(map = new Map<string, unknown>()) {
  const state: Faults = { writes: [], refused: [] };
  const unwrap = (key: string, value?: unknown): Write => {
    const parsed = typeof value === 'string' ? (JSON.parse(value) as { value?: unknown }).value : undefined;
    return { key: key.replace(/^hrw:/, ''), ...written(parsed) };
  };
  const refuse = (write: Write) => attempt(state, write, (message) => new Error(message));
  const store = {
    opts: { dialect: 'sqlite', url: '' },
    namespace: undefined as string | undefined,
    get: async (key: string) => map.get(key),
    set: async (key: string, value: unknown) => {
      const write = unwrap(key, value);
      await state.hold?.(write);
      refuse(write);
      map.set(key, value);
      return true;
    },
    delete: async (key: string) => {
      refuse(unwrap(key));
      return map.delete(key);
    },
    clear: async () => map.clear(),
    iterator: async function* () {
      yield* map.entries();
    },
    on: () => store,
  };
  return { keyv: () => new Keyv({ store: store as never, namespace: 'hrw' }), state, map };
}

/** A write's kind, for naming it: the key's prefix and the state it records. */
export function kindOf(w: Write): string {
  const prefix = w.key.split(':')[0]!;
  const v = w.value;
  if (prefix === 'run' && v) {
    const deliveries = (v.deliveries as Array<{ event: string; attempts: number; state: string }> | undefined) ?? [];
    const attempted = deliveries.filter((d) => d.attempts > 0).map((d) => `${d.event}:${d.state}`);
    const owed = deliveries.map((d) => d.event).join('+');
    return `run ${v.status}${v.process ? ' +process' : ''}${owed ? ` owes ${owed}` : ''}${attempted.length ? ` after ${attempted.join(',')}` : ''}`;
  }
  if (prefix === 'idem' && v) return `idem ${v.state}`;
  if (prefix === 'events') return w.key.split(':').length > 2 ? 'events segment' : 'events head';
  if (!v) return `delete ${prefix}`;
  return prefix;
}

/** Refuses the first write `match` picks, and with `crash` every write after it too (the service is dead from there on). */
export function refusingFirst(match: (w: Write) => boolean, crash: boolean): (w: Write) => boolean {
  let hit = false;
  return (w) => {
    if (hit) return crash;
    hit = match(w);
    return hit;
  };
}
