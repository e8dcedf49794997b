import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { processStartTime } from '../../src/core/process/process-tree';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import type { StoredRun } from '../../src/core/types';
import { COPY_MACHINE, copyPlacement } from '../fixtures/copy-placement';
import { closeAllHosts, createTestHost, memoryLogger, problem } from '../helpers/harness';
import { isAlive, isDead } from '../helpers/processes';
import { storedRun } from '../helpers/records';
import { waitFor } from '../helpers/wait';

afterEach(closeAllHosts);
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A process standing in for what a run placed by `copy` left running, in its own group. */
function leftover(): Promise<ChildProcess> {
  return new Promise((done) => {
    const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    children.push(child);
    child.once('spawn', () => done(child));
  });
}

/** A store holding a run an earlier instance started on the copy host, its process still alive. */
async function leftOnCopyHost(taskId: string) {
  const orphan = await leftover();
  const pid = orphan.pid ?? 0;
  const store = createMemoryKeyv();
  const createdAt = new Date(Date.now() - 60_000).toISOString();
  const placement = { provider: 'copy', cwd: '/nowhere', data: { folder: '/nowhere' } };
  const process = { pid, startTime: processStartTime(pid), machine: COPY_MACHINE };
  await store.set(`run:${taskId}`, storedRun(taskId, { createdAt, timeoutMs: 300_000, process, placement, bootId: 'boot_earlier' }));
  return { pid, store };
}

describe('a placement provider registered through the `placements` option', () => {
  it('places a run (its record names it), and its host is asked to read its memory and to stop it', async () => {
    const copy = copyPlacement();
    const store = createMemoryKeyv();
    const host = await createTestHost({ store, placements: [copy], maxMemoryMb: 100_000 });
    writeFileSync(`${host.dir}/marker.txt`, 'here');
    const { taskId } = await host.start('cwd; sh cat marker.txt; sleep 30000', { isolation: 'copy' });
    await waitFor(async () => ((await store.get(`run:${taskId}`)) as StoredRun | undefined)?.process !== undefined, { what: 'its process recorded' });
    const stored = (await store.get(`run:${taskId}`)) as StoredRun;
    const folder = (stored.placement as { data: { folder: string } }).data.folder;
    expect(stored.placement).toEqual({ provider: 'copy', cwd: folder, data: { folder } });
    expect(stored.process?.machine).toBe(COPY_MACHINE);
    expect(stored.policy).toMatchObject({ isolation: 'copy' });
    await waitFor(() => copy.calls.some((c) => c.op === 'memory' && c.taskId === taskId), { what: 'a memory reading from its host' });

    expect((await host.request('POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    const ended = await host.waitEnded(taskId);
    expect(ended).toMatchObject({ status: 'cancelled', policy: { isolation: 'copy' } });
    expect(copy.calls).toContainEqual({ op: 'kill', taskId, signal: 'SIGTERM', data: { folder } });
    expect(copy.calls).toContainEqual({ op: 'reap', taskId, data: { folder } });
    const out = (await (await host.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string };
    // It ran in the copy, which had the workspace's files; released as it ended.
    expect(out.stdout).toContain(folder);
    expect(out.stdout).toContain('here');
    await waitFor(() => !existsSync(folder), { what: 'its copy released' });
  });

  it('after a restart, the host that placed a run reaps what it left, not the local machine', async () => {
    // Recorded on the copy host: the local machine's reaper alone would leave it (its machine is not this one).
    const { pid, store } = await leftOnCopyHost('run_copied');
    const copy = copyPlacement();
    const host = await createTestHost({ store, placements: [copy] });
    expect(await (await host.request('GET', '/api/headless/run_copied')).json()).toMatchObject({ status: 'interrupted' });
    expect(copy.calls).toContainEqual({ op: 'reap', taskId: 'run_copied', data: { folder: '/nowhere' } });
    expect(copy.calls).toContainEqual({ op: 'alive', taskId: 'run_copied', data: { folder: '/nowhere' } });
    expect(await isDead(pid)).toBe(true);
  });

  it('without it registered, a restart leaves a process another host recorded alone, and says its place could not be released', async () => {
    const { pid, store } = await leftOnCopyHost('run_elsewhere');
    const { lines, logger } = memoryLogger();
    const host = await createTestHost({ store, logger });
    expect(await (await host.request('GET', '/api/headless/run_elsewhere')).json()).toMatchObject({ status: 'interrupted' });
    expect(isAlive(pid)).toBe(true);
    expect(lines.map((l) => l.message)).toContain('could not release the placement of run_elsewhere');
  });

  it('an isolation that names no registered provider: 400 at start, naming the registered ones; an error at creation for a workspace', async () => {
    const host = await createTestHost({ placements: [copyPlacement()] });
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'exit 0', agent: 'fake', isolation: 'pod' } });
    expect(await problem(res)).toMatchObject({ status: 400, code: 'invalid_body' });
    const again = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'exit 0', agent: 'fake', isolation: 'pod' } });
    expect(((await again.json()) as { detail: string }).detail).toBe(
      'Field "isolation" is invalid: isolation "pod" names no placement provider (registered: copy, worktree, none).',
    );
    await expect(createTestHost({ workspaces: [{ id: 'ws', path: host.dir, run: { isolation: 'copy' } }] })).rejects.toThrow(
      'workspace "ws": isolation "copy" names no placement provider (registered: worktree, none)',
    );
    await expect(createTestHost({ placements: [copyPlacement(), copyPlacement()] })).rejects.toThrow('placements: two providers are named "copy"');
  });
});
