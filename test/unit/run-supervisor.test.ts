import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { type Guard, watchdog } from '../../src/core/runs/guards';
import { STOPS } from '../../src/core/runs/outcome';
import { type SupervisedProcess, superviseProcess } from '../../src/core/runs/supervisor';
import { type SpawnOptions, type Spawner, createExecaSpawner } from '../../src/core/process/spawner';
import { FAKE_AGENT } from '../helpers/harness';
import { localHost } from '../../src/core/process/local-host';
import { isDead, noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';

/**
 * A spawner of the kind a host might write: plain child_process, no process group of its own,
 * so signalling "the group" reaches nothing but the child. Escaped descendants must still be reaped.
 */
const plainSpawner: Spawner = (o) =>
  new Promise((resolve, reject) => {
    const child = spawn(o.command, o.args, { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.once('error', reject);
    child.once('spawn', () =>
      resolve({
        pid: child.pid!,
        kill: (signal) => void child.kill(signal),
        exit: new Promise((settle) =>
          child.once('exit', (exitCode, signal) => setTimeout(() => settle({ exitCode, signal, stdout, stderr: '', truncated: false }), 100)),
        ),
      }),
    );
  });

let counter = 0;
function spawnOptions(prompt: string): SpawnOptions & { taskId: string } {
  const taskId = `run_supervisor_${process.pid}_${++counter}`;
  return {
    taskId,
    command: process.execPath,
    args: [FAKE_AGENT, prompt],
    cwd: process.cwd(),
    env: { PATH: process.env.PATH ?? '', HEADLESS_TASK_ID: taskId },
  };
}

const started: SupervisedProcess[] = [];
afterEach(async () => {
  for (const s of started.splice(0)) s.stop(STOPS.shutdown, 0);
});

async function supervise(spawner: Spawner, prompt: string, timeoutMs = 20_000, killGraceMs = 5000, more: Guard[] = []) {
  const spawn = spawnOptions(prompt);
  const supervised = await superviseProcess({
    spawner,
    spawn,
    host: localHost,
    run: { taskId: spawn.taskId },
    guards: [watchdog(timeoutMs), ...more],
    killGraceMs,
  });
  started.push(supervised);
  return { supervised, taskId: spawn.taskId };
}

describe('the run supervisor', () => {
  it('reports the exit and output of a process that ends by itself', async () => {
    const { supervised } = await supervise(createExecaSpawner(), 'echo hello; exit 3');
    const end = await supervised.ended;
    expect(end).toMatchObject({ exitCode: 3, signal: null });
    expect(end.stdout).toContain('hello');
    expect(supervised.stopped).toBeUndefined();
  });

  it('the watchdog stops a process that overruns, with reason timeout', async () => {
    const { supervised } = await supervise(createExecaSpawner(), 'sleep 20000', 300);
    const end = await supervised.ended;
    expect(supervised.stopped?.reason).toBe('timeout');
    expect(end.signal).toBe('SIGTERM');
  });

  it('a guard of the list sees each line and stops the run with its own stop; its watch ends with the process', async () => {
    const seen: string[] = [];
    let ended = false;
    const onMarker: Guard = (run) => {
      run.onLine((line) => {
        seen.push(line);
        if (line === 'marker') run.stop({ reason: 'marker', status: 'failed', error: { code: 'marker', message: 'saw the marker' } });
      });
      return () => {
        ended = true;
      };
    };
    const { supervised } = await supervise(createExecaSpawner(), 'echo first; echo marker; sleep 20000', 20_000, 5000, [onMarker]);
    await supervised.ended;
    expect(seen).toEqual(['first', 'marker']);
    expect(supervised.stopped).toMatchObject({ reason: 'marker', status: 'failed' });
    expect(ended).toBe(true);
  });

  it('the first stop decides; later stops and stops after the end are refused', async () => {
    const { supervised } = await supervise(createExecaSpawner(), 'sleep 20000');
    expect(supervised.stop(STOPS.cancel, 5000)).toBe(true);
    expect(supervised.stop(STOPS.shutdown, 0)).toBe(false);
    await supervised.ended;
    expect(supervised.stopped?.reason).toBe('cancel');
    expect(supervised.stop(STOPS.unrecorded, 0)).toBe(false);
  });

  it('SIGKILLs after the grace when SIGTERM is ignored', async () => {
    const { supervised } = await supervise(createExecaSpawner(), 'ignore-term; echo ready; sleep 20000');
    // Once it says it is ready it ignores SIGTERM, however slowly it started.
    await waitFor(() => supervised.output()?.stdout.includes('ready') === true, { timeoutMs: 240_000, what: 'the agent to be ready' });
    supervised.stop(STOPS.cancel, 200);
    expect((await supervised.ended).signal).toBe('SIGKILL');
  });

  it('with a custom spawner, a descendant that left the process group is still reaped after exit', async () => {
    const { supervised, taskId } = await supervise(plainSpawner, 'setsid-grandchild 30000; echo done');
    const end = await supervised.ended;
    expect(end.exitCode).toBe(0);
    const grandchild = Number(/grandchild (\d+)/.exec(end.stdout)?.[1]);
    expect(grandchild).toBeGreaterThan(0);
    expect(await isDead(grandchild)).toBe(true);
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('with the default spawner too', async () => {
    const { supervised, taskId } = await supervise(createExecaSpawner({ drainMs: 200 }), 'setsid-grandchild 30000; grandchild 30000; echo done');
    const end = await supervised.ended;
    // Both were started (each printed its pid), and none outlived the run.
    const grandchildren = [...end.stdout.matchAll(/grandchild (\d+)/g)].map((m) => Number(m[1]));
    expect(grandchildren).toHaveLength(2);
    for (const pid of grandchildren) expect(await isDead(pid)).toBe(true);
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('a spawner that loses the process still ends the run, reporting it lost', async () => {
    const lost = new Error('lost');
    const losing: Spawner = async () => ({ pid: 999_999_999, kill: () => undefined, exit: Promise.reject(lost) });
    const { supervised } = await supervise(losing, '');
    const end = await supervised.ended;
    expect(end.lost).toBe(lost);
    expect(end.exitCode).toBeNull();
  });

  it('rejects when the spawner cannot start the process', async () => {
    const spawn = { ...spawnOptions(''), command: '/nonexistent/agent' };
    await expect(
      superviseProcess({ spawner: createExecaSpawner(), spawn, host: localHost, run: { taskId: spawn.taskId }, guards: [watchdog(1000)], killGraceMs: 0 }),
    ).rejects.toThrow(/cannot start/);
  });
});
