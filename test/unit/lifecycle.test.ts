import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Keyv } from 'keyv';
import { afterEach, describe, expect, it } from 'vitest';
import { createSqliteKeyv } from '../../src/core/store/keyvs';
import type { Webhooks } from '../../src/core/delivery/webhooks';
import { RunEvents } from '../../src/core/events/run-events';
import { SessionBook } from '../../src/core/sessions';
import { createFleet } from '../../src/core/fleet/index';
import { RunLifecycle } from '../../src/core/runs/lifecycle';
import { inWorkspace } from '../../src/core/runs/placement';
import { openRunRecords } from '../../src/core/runs/record-writer';
import { takeOverRuns } from '../../src/core/runs/recovery';
import type { CollectionSpec, HeadlessStore, RecordTable } from '../../src/core/store/headless-store';
import { keyvStore } from '../../src/core/store/keyv-store';
import { createObserver } from '../../src/core/telemetry/observer';
import type { RunRecord } from '../../src/contract/records';
import type { StoredRun } from '../../src/core/types';
import { localHost } from '../../src/core/process/local-host';
import { Placements } from '../../src/core/runs/placements';
import { storedRun } from '../helpers/records';

const ME = 'inst_me';

function queued(taskId: string, owner = 'inst_accepting'): StoredRun {
  const queue = { prompt: 'p', resumes: false, apiUrl: 'http://127.0.0.1', expiresAt: new Date(Date.now() + 60_000).toISOString() };
  return storedRun(taskId, { status: 'queued', bootId: owner, queued: queue });
}

/**
 * The daemon's SQLite store, whose writes of one key can be held after they have landed, before
 * the writer hears so: what PostgreSQL looks like to an instance whose UPDATE committed while its
 * answer is on the way. Lookups (the running runs a sweep reads) are SQL over the table, so a
 * sweep sees the landed write.
 */
async function holdingStore() {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-lifecycle-'));
  dirs.push(dir);
  const keyv = await createSqliteKeyv(dir);
  const inner = keyvStore(keyv);
  let hold: { id: string; landed: (release: () => void) => void } | undefined;
  const store: HeadlessStore = {
    ...inner,
    table<T extends object>(spec: CollectionSpec<T>): RecordTable<T> {
      const table = inner.table(spec);
      return {
        ...table,
        async put(id, value) {
          await table.put(id, value);
          if (hold?.id !== id) return;
          const held = hold;
          hold = undefined;
          await new Promise<void>((release) => held.landed(release));
        },
      };
    },
  };
  return {
    keyv,
    store,
    /** Holds the next write of run `id` once it has landed; resolves, once it has, with what lets it answer. */
    holdNext(id: string): Promise<() => void> {
      return new Promise((landed) => {
        hold = { id, landed };
      });
    },
  };
}

const dirs: string[] = [];
const stores: Keyv[] = [];
afterEach(async () => {
  for (const keyv of stores.splice(0)) await keyv.disconnect();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function setup() {
  const held = await holdingStore();
  stores.push(held.keyv);
  const { store } = held;
  const log = () => undefined;
  const { records, writer } = openRunRecords({ store, log });
  await records.load();
  const ended: RunRecord[] = [];
  const observe = createObserver([{ runEnded: (run) => void ended.push(run) }], (error) => {
    throw error;
  });
  const webhooks = { schedule: () => undefined } as unknown as Webhooks;
  const events = new RunEvents({ store, log });
  const released: Array<{ taskId: string; cwd: string }> = [];
  // A placement double: what the ended path releases.
  const placement = {
    ...inWorkspace,
    release: async (run: { taskId: string; placement: { cwd: string } }) => void released.push({ taskId: run.taskId, cwd: run.placement.cwd }),
  };
  const placements = new Placements([placement]);
  const lifecycle = new RunLifecycle({ records, writer, events, webhooks, observe, log, instanceId: ME, placement: placements });
  const sessions = new SessionBook(store, createFleet(store, { log }), () => true, log);
  // Every owner is gone, this instance's own earlier claims included: only what it runs now is spared.
  const sweep = () =>
    takeOverRuns({
      records,
      lifecycle,
      sessions,
      log,
      isGone: async () => true,
      instanceId: ME,
      shared: true,
      hostOf: () => localHost,
      answerOf: async () => undefined,
    });
  return { held, records, writer, lifecycle, sweep, ended, events, released };
}

describe('the lifecycle against take-over sweeps (the fleet defect: a taken run recorded interrupted while its agent ran)', () => {
  it('a sweep while the take has landed but not yet answered leaves the run to its taker', async () => {
    const { held, records, writer, lifecycle, sweep } = await setup();
    await writer.add(queued('run_taking'));
    const landed = held.holdNext('run_taking');
    const taking = lifecycle.take('run_taking');
    const release = await landed;
    expect((await records.find('run_taking'))?.status).toBe('running');
    // The sweep either passes the run over, or tries to write it (the interrupt, queued behind the held take).
    let tried!: () => void;
    const triedToWrite = new Promise<string>((r) => (tried = () => r('tried to interrupt it')));
    const update = writer.update.bind(writer);
    writer.update = (taskId, change) => {
      tried();
      return update(taskId, change);
    };
    const first = await Promise.race([sweep().then((n) => `swept, ${n} interrupted`), triedToWrite]);
    release();
    expect(first).toBe('swept, 0 interrupted');
    expect(await taking).toMatchObject({ status: 'running', bootId: ME });
    expect((await records.find('run_taking'))?.status).toBe('running');
  });

  it('a sweep after the take and before the process is recorded (a launch held longer than a sweep) leaves it too', async () => {
    const { records, writer, lifecycle, sweep } = await setup();
    await writer.add(queued('run_launching'));
    expect(await lifecycle.take('run_launching')).toMatchObject({ status: 'running' });
    expect(await sweep()).toBe(0);
    expect(await sweep()).toBe(0);
    expect((await records.find('run_launching'))?.status).toBe('running');
  });

  it('a run of this instance that it no longer runs (a claim whose end was refused) is interrupted, through the one ended path', async () => {
    const { records, writer, lifecycle, sweep, ended, released } = await setup();
    await writer.add({ ...queued('run_orphan', ME), status: 'running', queued: undefined, placement: { cwd: '/placed/run_orphan' } });
    expect(await sweep()).toBe(1);
    expect(released).toEqual([{ taskId: 'run_orphan', cwd: '/placed/run_orphan' }]);
    expect(await records.find('run_orphan')).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    expect(ended.map((r) => [r.taskId, r.status])).toEqual([['run_orphan', 'interrupted']]);
    expect(lifecycle.isHere('run_orphan')).toBe(false);
  });

  it('a run another instance took over and ended before its owner finished: the owner tells its waiters, but announces nothing again', async () => {
    const { writer, lifecycle, ended } = await setup();
    await writer.add({ ...queued('run_raced', ME), status: 'running', queued: undefined });
    // Another instance claimed it (this one's lease ran out) and ended it interrupted, announcing that.
    await writer.update('run_raced', (r) => ({ ...r, status: 'interrupted', bootId: 'inst_other', endedAt: new Date().toISOString() }));
    const waiting = lifecycle.waitFor('run_raced');
    const told: boolean[] = [];
    await lifecycle.finish('run_raced', ME, { status: 'succeeded', exitCode: 0, signal: null }, async (stored, mine) => {
      told.push(mine);
      await lifecycle.ended(stored, { here: mine });
    });
    expect(told).toEqual([false]);
    expect(ended).toEqual([]);
    expect((await waiting).record).toMatchObject({ taskId: 'run_raced', status: 'interrupted' });
    // Its own finish, where nothing came first, is its to announce.
    await writer.add({ ...queued('run_mine', ME), status: 'running', queued: undefined });
    await lifecycle.finish('run_mine', ME, { status: 'succeeded', exitCode: 0, signal: null }, (stored, mine) => lifecycle.ended(stored, { here: mine }));
    expect(ended.map((r) => [r.taskId, r.status])).toEqual([['run_mine', 'succeeded']]);
  });

  it('a queued run ended without starting goes through the same ended path, and its waiter is told', async () => {
    const { writer, lifecycle, ended } = await setup();
    await writer.add(queued('run_cancel'));
    const waiting = lifecycle.waitFor('run_cancel');
    expect(await lifecycle.endQueued('run_cancel', 'cancelled')).toMatchObject({ status: 'cancelled' });
    expect((await waiting).record).toMatchObject({ taskId: 'run_cancel', status: 'cancelled' });
    expect(ended.map((r) => r.status)).toEqual(['cancelled']);
    expect(await lifecycle.endQueued('run_cancel', 'expired')).toBeUndefined();
    expect(ended).toHaveLength(1);
  });

  it('at shutdown a caller still waiting for a queued run is told it goes on later, not left hanging', async () => {
    const { writer, lifecycle } = await setup();
    await writer.add(queued('run_later'));
    const waiting = lifecycle.waitFor('run_later');
    await lifecycle.close();
    await expect(waiting).rejects.toMatchObject({ name: 'StillPending', record: { taskId: 'run_later', status: 'queued' } });
  });
});
