import { Keyv } from 'keyv';

/** One write (set or delete) the service made: its key, without the namespace, and what it wrote. */
export interface Write {
  key: string;
  value?: Record<string, unknown>;
}

/**
 * A Keyv store over a Map that can refuse chosen writes, for the fault-injection tier. `refuse`
 * picks the write(s) to refuse (as SQLite does on a full disk, by throwing), `hold` may keep one
 * waiting (a slow disk, a busy machine); every write is
 * logged, refused or not. The Map outlives the service, so a new one can start on what the old
 * one left, as after a restart.
 */
export function faultyKeyv(map = new Map<string, unknown>()) {
  const state: { refuse?: (write: Write) => boolean; hold?: (write: Write) => Promise<void> | undefined; writes: Write[]; refused: Write[] } = {
    writes: [],
    refused: [],
  };
  const unwrap = (key: string, value?: unknown): Write => {
    const parsed = typeof value === 'string' ? (JSON.parse(value) as { value?: Record<string, unknown> }).value : undefined;
    return { key: key.replace(/^hrw:/, ''), ...(parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? { value: parsed } : {}) };
  };
  const attempt = (write: Write) => {
    state.writes.push(write);
    if (state.refuse?.(write)) {
      state.refused.push(write);
      throw new Error('SQLITE_FULL: database or disk is full (fault injected)');
    }
  };
  const store = {
    opts: { dialect: 'sqlite', url: '' },
    namespace: undefined as string | undefined,
    get: async (key: string) => map.get(key),
    set: async (key: string, value: unknown) => {
      const write = unwrap(key, value);
      await state.hold?.(write);
      attempt(write);
      map.set(key, value);
      return true;
    },
    delete: async (key: string) => {
      attempt(unwrap(key));
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
