import { describe, expect, it } from 'vitest';
import { Refusal } from '../../src/contract/problems';
import { createFleet } from '../../src/core/fleet/index';
import { type AnswerV1, IdempotencyKeys, type Once } from '../../src/core/idempotency';
import { asHeadlessStore } from '../../src/core/store/keyv-store';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { sha256 } from '../../src/core/util/ids';

/** The idempotency unit alone: what a key keeps is its caller's own answer; entries kept before version 2 are still answered. */

const log = () => undefined;

function setup() {
  const store = asHeadlessStore(createMemoryKeyv());
  const keys = new IdempotencyKeys(store, createFleet(store, { log }), log);
  /** The runs the operations made: what `replay` finds. */
  const runs = new Set<string>();
  const executed: string[] = [];
  const how: Once<{ made: string }> = {
    async execute(taskId) {
      executed.push(taskId);
      runs.add(taskId);
      return { made: taskId };
    },
    replay: async (taskId) => (runs.has(taskId) ? { made: taskId } : undefined),
  };
  const idOf = (key: string) => `idem:${sha256(`scope\0${key}`)}`;
  return { store, keys, runs, executed, how, idOf };
}

describe('an idempotent operation', () => {
  it("runs once; a retry with the same request gets the caller's own answer, kept as it was (version 2)", async () => {
    const { store, keys, executed, how, idOf } = setup();
    const first = await keys.once('scope', 'k', { a: 1, b: 2 }, how);
    expect(first).toEqual({ answer: { made: executed[0] }, replayed: false });
    // The same fields in another order are the same request.
    expect(await keys.once('scope', 'k', { b: 2, a: 1 }, how)).toEqual({ answer: first.answer, replayed: true });
    expect(executed).toHaveLength(1);
    expect(await store.get(idOf('k'))).toMatchObject({ version: 2, state: 'done', taskId: executed[0], answer: { made: executed[0] } });
    await expect(keys.once('scope', 'k', { a: 2 }, how)).rejects.toMatchObject({ code: 'idempotency_key_reused' });
  });

  it('a call cut off before its answer was kept is answered by its run; one that made none runs again', async () => {
    const { store, keys, runs, executed, how, idOf } = setup();
    const entry = { version: 2, fingerprint: sha256('{"a":1}'), state: 'pending', taskId: 'run_cut', createdAt: new Date().toISOString() };
    await store.set(idOf('cut'), entry);
    runs.add('run_cut');
    expect(await keys.once('scope', 'cut', { a: 1 }, how)).toEqual({ answer: { made: 'run_cut' }, replayed: true });
    await store.set(idOf('none'), { ...entry, taskId: 'run_never_made' });
    expect(await keys.once('scope', 'none', { a: 1 }, how)).toEqual({ answer: { made: executed[0] }, replayed: false });
  });

  it('a refusal that recorded its run keeps what `refused` gives; one that made no run frees its key', async () => {
    const { keys, runs, how } = setup();
    const failing: Once<{ made: string }> = {
      ...how,
      async execute(taskId) {
        runs.add(taskId);
        throw new Refusal('spawn_failed', 'no such agent', { extra: { taskId } });
      },
      refused: (_refusal, taskId) => ({ made: `${taskId} (failed)` }),
    };
    const refusal = await keys.once('scope', 'f', {}, failing).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'spawn_failed' });
    const taskId = (refusal as Refusal).extra.taskId;
    expect(await keys.once('scope', 'f', {}, how)).toEqual({ answer: { made: `${taskId} (failed)` }, replayed: true });

    const refusedEarly: Once<{ made: string }> = { ...how, execute: async () => Promise.reject(new Refusal('capacity_reached', 'busy')) };
    await expect(keys.once('scope', 'early', {}, refusedEarly)).rejects.toMatchObject({ code: 'capacity_reached' });
    expect(await keys.once('scope', 'early', {}, how)).toMatchObject({ replayed: false });
  });
});

describe('an entry kept before version 2 (an HTTP answer, whoever stored it)', () => {
  const v1 = (answer: AnswerV1, taskId = 'run_before') => ({
    fingerprint: sha256('{}'),
    state: 'done',
    taskId,
    answer,
    createdAt: new Date().toISOString(),
  });

  it('is read by `fromV1`, and nothing runs', async () => {
    const { store, keys, executed, how, idOf } = setup();
    await store.set(idOf('old'), v1({ status: 202, body: { taskId: 'run_before' }, headers: {} }));
    const reading: Once<{ made: string }> = { ...how, fromV1: (old) => ({ made: `${(old.body as { taskId: string }).taskId} (v1 ${old.status})` }) };
    expect(await keys.once('scope', 'old', {}, reading)).toEqual({ answer: { made: 'run_before (v1 202)' }, replayed: true });
    expect(executed).toEqual([]);
  });

  it('without `fromV1` (or one that cannot read it) is answered by its run, as a call cut off', async () => {
    const { store, keys, runs, executed, how, idOf } = setup();
    await store.set(idOf('old'), v1({ status: 202, body: {}, headers: {} }));
    runs.add('run_before');
    expect(await keys.once('scope', 'old', {}, { ...how, fromV1: () => undefined })).toEqual({ answer: { made: 'run_before' }, replayed: true });
    expect(await keys.once('scope', 'old', {}, how)).toEqual({ answer: { made: 'run_before' }, replayed: true });
    expect(executed).toEqual([]);
  });
});
