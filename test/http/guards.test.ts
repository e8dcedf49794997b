import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost, fakeAgent } from '../helpers/harness';
import { noneMarked } from '../helpers/processes';

/** docs/configuration.md, Guards: a stall guard, a memory ceiling, a free-memory floor; real processes. */

afterEach(closeAllHosts);

/** An agent that holds `mb` MB resident (filled, so it is really in memory) for a minute. */
const hog = (mb: number) => ({ command: process.execPath, args: ['-e', `const b = Buffer.alloc(${mb} * 1024 * 1024, 1); setTimeout(() => b[0], 60000)`] });

async function syncRun(host: Awaited<ReturnType<typeof createTestHost>>, body: Record<string, unknown>) {
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { wait: true, ...body } });
  return (await res.json()) as Record<string, any>;
}

describe('guards', () => {
  it('a stall guard stops an agent that prints nothing for stallTimeoutMs: timed_out, stalled, its whole tree', async () => {
    const host = await createTestHost({ stallTimeoutMs: 1000 });
    const body = await syncRun(host, { prompt: 'echo started; grandchild 60000; sleep 60000', agent: 'fake', timeoutMs: 120_000 });
    expect(body).toMatchObject({ status: 'timed_out', error: { code: 'stalled', message: 'Stopped: the agent printed nothing for 1000 ms.' } });
    expect(body.output.stdout).toContain('started');
    expect(await noneMarked([body.taskId])).toBe(true);
  });

  it('an agent that keeps printing is not stalled, and a workspace may set its own limit over the installation’s', async () => {
    const host = await createTestHost({
      stallTimeoutMs: 1,
      workspaces: [{ id: 'ws', path: tmpdir(), agents: ['fake'], run: { stallTimeoutMs: 30_000 } }],
      agents: { fake: fakeAgent },
    });
    const body = await syncRun(host, { prompt: 'echo a; sleep 200; echo b; sleep 200; echo c', agent: 'fake' });
    expect(body).toMatchObject({ status: 'succeeded' });
  });

  it('a memory ceiling stops a run whose processes hold more: failed, memory_limit', async () => {
    const host = await createTestHost({
      maxMemoryMb: 100,
      workspaces: [{ id: 'ws', path: tmpdir(), agents: ['hog'] }],
      agents: { hog: hog(300) },
    });
    const body = await syncRun(host, { prompt: 'x', agent: 'hog', timeoutMs: 120_000 });
    expect(body).toMatchObject({ status: 'failed', error: { code: 'memory_limit' } });
    expect(body.error.message).toMatch(/^Stopped: its processes used \d+ MB, over its ceiling of 100 MB\.$/);
  });

  it('under its ceiling, the same agent is left alone', async () => {
    const host = await createTestHost({
      maxMemoryMb: 2000,
      workspaces: [{ id: 'ws', path: tmpdir(), agents: ['hog'] }],
      agents: { hog: { command: process.execPath, args: ['-e', 'const b = Buffer.alloc(50 * 1024 * 1024, 1); setTimeout(() => b[0], 1500)'] } },
    });
    expect(await syncRun(host, { prompt: 'x', agent: 'hog' })).toMatchObject({ status: 'succeeded' });
  });

  it('below the free-memory floor no run starts: 429 without a queue, queued with one', async () => {
    const floor = 1024 * 1024 * 1024; // a petabyte: more than any machine has free
    const refusing = await createTestHost({ minFreeMemoryMb: floor });
    const res = await refusing.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } });
    const refused = (await res.json()) as Record<string, unknown>;
    expect([res.status, refused.code]).toEqual([429, 'capacity_reached']);
    expect(refused.detail).toMatch(/MB of memory is available, below the floor of 1073741824 MB; retry later\.$/);
    const queueing = await createTestHost({ minFreeMemoryMb: floor, queue: { max: 10 } });
    const queued = await queueing.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } });
    expect([queued.status, ((await queued.json()) as Record<string, unknown>).status]).toEqual([202, 'queued']);
  });

  it('a guard setting that cannot work is refused at start, naming it', async () => {
    await expect(createTestHost({ maxMemoryMb: 0 })).rejects.toThrow('maxMemoryMb must be a whole number of at least 1, not 0');
    await expect(createTestHost({ workspaces: [{ id: 'ws', path: tmpdir(), run: { stallTimeoutMs: 1.5 } }] })).rejects.toThrow(
      'workspace "ws": run.stallTimeoutMs is invalid',
    );
  });
});
