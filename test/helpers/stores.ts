import { Keyv } from 'keyv';

/**
 * A Keyv store over a Map that refuses writes while `state.failing` is set, or, when
 * `state.refuse` is given, the writes it returns true for. A refusal throws (as SQLite does on
 * a full disk) or reports the write as not done (`false`), per `mode`.
 */
export function refusingKeyv(mode: 'throw' | 'false') {
  const map = new Map<string, unknown>();
  const state: { failing: boolean; refuse?: (key: string, value: unknown) => boolean } = { failing: false };
  const store = {
    // keyv only iterates stores whose dialect it knows.
    opts: { dialect: 'sqlite', url: '' },
    namespace: undefined as string | undefined,
    get: async (key: string) => map.get(key),
    set: async (key: string, value: unknown) => {
      if (state.failing || state.refuse?.(key, value)) {
        if (mode === 'throw') throw new Error('SQLITE_FULL: database or disk is full');
        return false;
      }
      map.set(key, value);
      return true;
    },
    delete: async (key: string) => map.delete(key),
    clear: async () => map.clear(),
    iterator: async function* () {
      yield* map.entries();
    },
    on: () => store,
  };
  return { keyv: new Keyv({ store: store as never, namespace: 'hrw' }), state, map };
}
