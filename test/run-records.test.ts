import { afterEach, describe, expect, it } from 'vitest';
import { StorageError } from '../src/contract/problems';
import { RunRecords, publicRecord } from '../src/core/runs/records';
import { keyvStore } from '../src/core/store/keyv-store';
import type { StoredRun } from '../src/core/types';
import { refusingKeyv } from './helpers/stores';
import { waitFor } from './helpers/wait';

function running(taskId: string): StoredRun {
  return {
    taskId,
    resumeId: 'ses_1',
    workspaceId: 'ws',
    agent: 'fake',
    mode: 'async',
    status: 'running',
    createdAt: new Date().toISOString(),
    endedAt: null,
    durationMs: null,
    timeoutMs: 1000,
    exitCode: null,
    signal: null,
    bootId: 'boot_1',
    process: { pid: 123, startTime: '1' },
  };
}

const ended = (run: StoredRun): StoredRun => ({ ...run, status: 'failed', endedAt: new Date().toISOString(), durationMs: 5, exitCode: 1 });

const open: RunRecords[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((r) => r.close()));
});

function records(mode: 'throw' | 'false' = 'throw', extra: { cacheSize?: number; backgroundRetryMs?: number } = {}) {
  const { keyv, state, map } = refusingKeyv(mode);
  const logged: string[] = [];
  const r = new RunRecords({ store: keyvStore(keyv), log: (m) => logged.push(m), retryDelaysMs: [1, 1], backgroundRetryMs: 20, ...extra });
  open.push(r);
  return { records: r, state, map, logged };
}

describe('run records', () => {
  it('create, find and page; the public record hides what only recovery needs', async () => {
    const { records: r } = records();
    await r.create(running('run_a'));
    await r.create(running('run_b'));
    expect((await r.page('ws', 'running', 10)).ids).toEqual(['run_b', 'run_a']);
    const found = await r.find('run_a');
    expect(found?.status).toBe('running');
    expect(publicRecord(found!)).not.toHaveProperty('process');
    expect(publicRecord(found!)).not.toHaveProperty('bootId');
    expect(await r.find('run_none')).toBeUndefined();
  });

  it('a final record the store keeps refusing stays final for every reader, even once it would have left the cache', async () => {
    const { records: r, state, logged } = records('throw', { cacheSize: 1, backgroundRetryMs: 60_000 });
    const run = running('run_a');
    await r.create(run);
    state.failing = true;
    await r.finish(ended(run));
    expect(logged.join('\n')).toContain('could not store the final record of run_a');
    // Push it out of any cache: more ended runs than the cache holds.
    state.failing = false;
    for (const id of ['run_b', 'run_c', 'run_d']) {
      await r.create(running(id));
      await r.finish(ended(running(id)));
      await r.find(id);
    }
    expect((await r.find('run_a'))?.status).toBe('failed');
    expect((await r.page('ws', 'running', 10)).ids).toEqual([]);
    expect((await r.page('ws', 'failed', 10)).ids).toContain('run_a');
  });

  it('the background stores a refused final record once the store takes writes again', async () => {
    const { records: r, state, map } = records('false');
    const run = running('run_a');
    await r.create(run);
    state.failing = true;
    await r.finish(ended(run));
    const storedStatus = () => (JSON.parse(String(map.get('hrw:run:run_a'))) as { value: StoredRun }).value.status;
    expect(storedStatus()).toBe('running');
    state.failing = false;
    await waitFor(() => storedStatus() === 'failed', { what: 'the background retry' });
  });

  it('close makes one last attempt, then stops retrying', async () => {
    const { records: r, state, map } = records('throw', { backgroundRetryMs: 60_000 });
    const run = running('run_a');
    await r.create(run);
    state.failing = true;
    await r.finish(ended(run));
    state.failing = false;
    await r.close();
    expect(String(map.get('hrw:run:run_a'))).toContain('"failed"');
  });

  it('create and save throw StorageError when the store refuses; nothing is listed', async () => {
    const { records: r, state } = records();
    state.failing = true;
    await expect(r.create(running('run_a'))).rejects.toBeInstanceOf(StorageError);
    await expect(r.save(running('run_a'))).rejects.toBeInstanceOf(StorageError);
    expect((await r.page('ws', undefined, 10)).ids).toEqual([]);
  });
});
