import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/contract/records';
import { createFleet } from '../../src/core/fleet/index';
import { IdempotencyKeys } from '../../src/core/idempotency';
import type { StartedRun } from '../../src/core/runs/live-run';
import { Firing } from '../../src/core/schedules/firing';
import type { ScheduleDefinition } from '../../src/core/schedules/schedule-spec';
import { asHeadlessStore } from '../../src/core/store/keyv-store';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import type { StoredRun, Workspace } from '../../src/core/types';
import { sha256 } from '../../src/core/util/ids';
import { SILENT } from '../helpers/harness';

/** A schedule's firing as an idempotent start: what its key keeps is the run (taskId, status), read again on a repeat; entries kept before version 2 too. */

const log = () => undefined;
const NIGHTLY: ScheduleDefinition = { name: 'nightly', cron: '0 3 * * *', workspace: 'ws', prompt: 'check' };
const OCCURRENCE = '2026-11-22T03:00:00.000Z';

function setup() {
  const store = asHeadlessStore(createMemoryKeyv());
  const runs = new Map<string, StoredRun>();
  const started: string[] = [];
  const firing = new Firing({
    store,
    idempotency: new IdempotencyKeys(store, createFleet(store, { log }), log),
    runs: {
      async start({ taskId }) {
        const record = { taskId, status: 'running' } as RunRecord;
        started.push(record.taskId);
        runs.set(record.taskId, record as StoredRun);
        return { record, done: new Promise(() => undefined) } as StartedRun;
      },
      find: async (taskId) => runs.get(taskId),
    },
    workspace: async (id) => ({ id, path: '/tmp' }) as Workspace,
    apiUrl: () => '',
    logger: SILENT,
  });
  const keyId = `idem:${sha256(`ws\0schedule:nightly:${OCCURRENCE}`)}`;
  /** Fires the occurrence again as another instance would that has not seen its state (or after a refused state write). */
  const fireAgain = async () => {
    await store.delete('schedule:nightly');
    return firing.fire(NIGHTLY, OCCURRENCE);
  };
  return { store, runs, started, firing, keyId, fireAgain };
}

describe("a schedule's occurrence fired again", () => {
  it('gets the run its key keeps, the schedule’s own answer: { taskId, status }', async () => {
    const { store, started, firing, keyId, fireAgain } = setup();
    const first = await firing.fire(NIGHTLY, OCCURRENCE);
    expect(first).toEqual({ started: started[0], replayed: false });
    expect(await store.get(keyId)).toMatchObject({ version: 2, state: 'done', answer: { taskId: started[0], status: 'running' } });
    expect(await fireAgain()).toEqual({ started: started[0], replayed: true });
    expect(started).toHaveLength(1);
  });

  it('cut off before its answer was kept: its run answers', async () => {
    const { store, started, firing, keyId, fireAgain } = setup();
    await firing.fire(NIGHTLY, OCCURRENCE);
    const { answer: _, ...pending } = (await store.get<Record<string, unknown>>(keyId)) ?? {};
    await store.set(keyId, { ...pending, state: 'pending', taskId: started[0] });
    expect(await fireAgain()).toEqual({ started: started[0], replayed: true });
    expect(started).toHaveLength(1);
  });

  it.each([
    ['a 202', { status: 202, body: { taskId: 'run_before', resumeId: 'ses_1', status: 'running' }, headers: {} }],
    [
      'a spawn failure',
      { status: 500, body: { code: 'spawn_failed', status: 500, taskId: 'run_before' }, headers: { 'content-type': 'application/problem+json' } },
    ],
  ])('kept before version 2 (%s, as an HTTP answer): the run it names, nothing started', async (_name, answer) => {
    const { store, started, firing, keyId, fireAgain } = setup();
    await firing.fire(NIGHTLY, OCCURRENCE);
    const { version: _, ...entry } = (await store.get<Record<string, unknown>>(keyId)) ?? {};
    await store.set(keyId, { ...entry, taskId: 'run_planned', answer });
    expect(await fireAgain()).toEqual({ started: 'run_before', replayed: true });
    expect(started).toHaveLength(1);
  });
});
