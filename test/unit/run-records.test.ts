import { afterEach, describe, expect, it } from 'vitest';
import { StorageError } from '../../src/contract/problems';
import { publicRecord } from '../../src/core/public-record';
import { type RunRecordWriter, openRunRecords } from '../../src/core/runs/record-writer';
import { keyvStore } from '../../src/core/store/keyv-store';
import type { StoredRun } from '../../src/core/types';
import { storedRun } from '../helpers/records';
import { refusingKeyv } from '../helpers/stores';
import { waitFor } from '../helpers/wait';

function running(taskId: string): StoredRun {
  return storedRun(taskId, { resumeId: 'ses_1', process: { pid: 123, startTime: '1', machine: 'host/boot' } });
}

const end = (run: StoredRun): StoredRun | undefined =>
  run.status === 'running' ? { ...run, status: 'failed', endedAt: new Date().toISOString(), durationMs: 5, exitCode: 1 } : undefined;

const open: RunRecordWriter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((w) => w.close()));
});

function records(mode: 'throw' | 'false' = 'throw', extra: { cacheSize?: number; backgroundRetryMs?: number } = {}) {
  const { keyv, state, map } = refusingKeyv(mode);
  const logged: string[] = [];
  const { records: r, writer: w } = openRunRecords({
    store: keyvStore(keyv),
    log: (m) => logged.push(m),
    retryDelaysMs: [1, 1],
    backgroundRetryMs: 20,
    ...extra,
  });
  open.push(w);
  return { records: r, writer: w, state, map, logged };
}

const storedStatus = (map: Map<string, unknown>, taskId: string) => (JSON.parse(String(map.get(`hrw:run:${taskId}`))) as { value: StoredRun }).value.status;

describe('run records', () => {
  it('create, find and page; the public record hides what only recovery and the outbox need', async () => {
    const { records: r, writer: w } = records();
    await w.create(running('run_a'));
    await w.create({ ...running('run_b'), agentSessionId: 'agent-1', deliveries: [], deliveryDueAt: 1 });
    expect((await r.page('ws', 'running', 10)).ids).toEqual(['run_b', 'run_a']);
    const found = await r.find('run_b');
    expect(found?.status).toBe('running');
    for (const hidden of ['process', 'bootId', 'agentSessionId', 'deliveries', 'deliveryDueAt']) expect(publicRecord(found!)).not.toHaveProperty(hidden);
    expect(await r.find('run_none')).toBeUndefined();
  });

  it('a final record the store refuses is never shown: the run reads as running everywhere until it is stored', async () => {
    const { records: r, writer: w, state, logged, map } = records('throw', { cacheSize: 1, backgroundRetryMs: 60_000 });
    await w.create(running('run_a'));
    state.failing = true;
    const told: StoredRun[] = [];
    expect(await w.finish('run_a', end, (run) => void told.push(run))).toBe(false);
    expect(logged.join('\n')).toContain('could not store the final record of run_a');
    expect(told).toEqual([]);
    expect(r.current('run_a')?.status).toBe('running');
    expect((await r.find('run_a'))?.status).toBe('running');
    expect((await r.page('ws', 'running', 10)).ids).toEqual(['run_a']);
    expect(storedStatus(map, 'run_a')).toBe('running');
  });

  it('the background stores a refused final record once the store takes writes again, and tells whoever waits', async () => {
    const { records: r, writer: w, state, map } = records('false');
    await w.create(running('run_a'));
    state.failing = true;
    const told: StoredRun[] = [];
    await w.finish('run_a', end, (run) => void told.push(run));
    expect(storedStatus(map, 'run_a')).toBe('running');
    state.failing = false;
    await waitFor(() => told.length === 1, { what: 'the background retry' });
    expect(storedStatus(map, 'run_a')).toBe('failed');
    expect(told[0]?.status).toBe('failed');
    expect((await r.page('ws', 'failed', 10)).ids).toEqual(['run_a']);
  });

  it('close makes one last attempt, then stops retrying', async () => {
    const { writer: w, state, map } = records('throw', { backgroundRetryMs: 60_000 });
    await w.create(running('run_a'));
    state.failing = true;
    await w.finish('run_a', end, () => undefined);
    state.failing = false;
    await w.close();
    expect(storedStatus(map, 'run_a')).toBe('failed');
  });

  it('updates of one run never overlap: each sees the one before', async () => {
    const { records: r, writer: w } = records();
    await w.create(running('run_a'));
    await Promise.all(Array.from({ length: 20 }, () => w.update('run_a', (run) => ({ ...run, timeoutMs: run.timeoutMs + 1 }))));
    expect((await r.find('run_a'))?.timeoutMs).toBe(1020);
  });

  it('create and update throw StorageError when the store refuses; nothing is listed', async () => {
    const { records: r, writer: w, state } = records();
    state.failing = true;
    await expect(w.create(running('run_a'))).rejects.toBeInstanceOf(StorageError);
    expect((await r.page('ws', undefined, 10)).ids).toEqual([]);
    state.failing = false;
    await w.create(running('run_b'));
    state.failing = true;
    await expect(w.update('run_b', (run) => ({ ...run, timeoutMs: 5 }))).rejects.toBeInstanceOf(StorageError);
    expect((await r.find('run_b'))?.timeoutMs).toBe(1000);
  });

  it('a page of runs is one read of those not in memory, in the order asked: running ones and kept ones are not read again', async () => {
    const { keyv } = refusingKeyv('throw');
    const store = keyvStore(keyv);
    const reads: Array<{ one?: string; many?: string[] }> = [];
    const counted = {
      ...store,
      table: <T extends object>(spec: Parameters<typeof store.table<T>>[0]) => {
        const table = store.table<T>(spec);
        return {
          ...table,
          get: (id: string) => {
            reads.push({ one: id });
            return table.get(id);
          },
          getMany: (ids: string[]) => {
            reads.push({ many: ids });
            return table.getMany(ids);
          },
        };
      },
    };
    // Written by one instance of the records, read by a fresh one: nothing of them in its memory.
    const writer = openRunRecords({ store, log: () => undefined }).writer;
    const { records: r, writer: w } = openRunRecords({ store: counted, log: () => undefined });
    open.push(writer, w);
    const ended = (taskId: string) => ({ ...storedRun(taskId), status: 'succeeded' as const, endedAt: new Date().toISOString() });
    for (const id of ['run_a', 'run_b', 'run_c', 'run_d']) await writer.create(ended(id));
    await w.create(running('run_live'));
    await r.find('run_c'); // now kept in memory
    reads.length = 0;
    const found = await r.findMany(['run_d', 'run_live', 'run_none', 'run_c', 'run_a']);
    expect(found.map((run) => run?.taskId)).toEqual(['run_d', 'run_live', undefined, 'run_c', 'run_a']);
    expect(reads).toEqual([{ many: ['run_d', 'run_none', 'run_a'] }]);
    reads.length = 0;
    await r.findMany(['run_d', 'run_a', 'run_live']);
    expect(reads, 'ended runs read once are kept').toEqual([]);
  });
});
