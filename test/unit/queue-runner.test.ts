import { describe, expect, it } from 'vitest';
import { QueueRunner } from '../../src/core/queue/runner';
import type { StoredRun } from '../../src/core/types';
import { waitFor } from '../helpers/wait';

/** The queue runner's order, with the store and the slots stood in for: no timing involved. */
describe('the queue runner', () => {
  it('gives a slot that frees during a pass to the oldest queued run, not to the one the pass has reached', async () => {
    let free = 0;
    const taken: string[] = [];
    const queued = new Set(['run_a', 'run_b', 'run_c']);
    const record = (taskId: string) =>
      ({ taskId, status: 'queued', queued: { prompt: 'x', resumes: false, apiUrl: '', expiresAt: '2999-01-01T00:00:00Z' } }) as StoredRun;
    let runner!: QueueRunner;
    runner = new QueueRunner({
      ids: async () => [...queued].sort(),
      expire: async () => undefined,
      freeSlots: () => free,
      async find(taskId) {
        // The slot frees while the pass reads run_b, after it found none for run_a.
        if (taskId === 'run_b' && free === 0 && taken.length === 0) {
          free = 1;
          runner.kick();
        }
        return queued.has(taskId) ? record(taskId) : undefined;
      },
      async take(r) {
        taken.push(r.taskId);
        queued.delete(r.taskId);
        free -= 1;
        return 'started';
      },
      log: () => undefined,
      sweepMs: 60_000,
    });
    runner.start();
    await waitFor(() => taken.length === 1, { what: 'a take' });
    runner.stop();
    expect(taken).toEqual(['run_a']);
  });
});
