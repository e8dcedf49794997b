import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { api, cleanupDaemons, startDaemon, startFakeDaemon, waitRun } from '../helpers/daemon';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => cleanupDaemons(dirs));

describe('GET /api/headless/:taskId/output', () => {
  it('while an async run runs, then once it ended: the tail of stdout and stderr', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo first line; sleep 700; echo second line');
    const read = async (query = '') => (await (await host.request('GET', `/api/headless/${taskId}/output${query}`)).json()) as Record<string, any>;
    await waitFor(async () => (await read()).stdout === 'first line\n', { what: 'the first line while running' });
    expect(await read()).toMatchObject({ taskId, status: 'running', stderr: '', truncated: false, retained: true });
    await host.waitEnded(taskId);
    expect(await read()).toMatchObject({ status: 'succeeded', stdout: 'first line\nsecond line\n', retained: true });
    expect(await read('?tail=5')).toMatchObject({ stdout: 'line\n', truncated: true });
  });

  it('cuts at a character boundary, never inside one', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo né');
    await host.waitEnded(taskId);
    // "né\n" is 4 bytes; its last 2 start inside "é", which is then left out whole.
    const body = (await (await host.request('GET', `/api/headless/${taskId}/output?tail=2`)).json()) as { stdout: string };
    expect(body.stdout).toBe('\n');
  });

  it('bounded: a flood keeps only the last 64 KiB, marked truncated', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('print 200000');
    await host.waitEnded(taskId);
    const body = (await (await host.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string; truncated: boolean };
    expect(body.stdout.length).toBe(65_536);
    expect(body.truncated).toBe(true);
  });

  it.each([['0'], ['-1'], ['65537'], ['abc'], ['1.5']])('tail=%s is 400 invalid_body', async (tail) => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo x');
    expect(await problem(await host.request('GET', `/api/headless/${taskId}/output?tail=${tail}`))).toMatchObject({ status: 400, code: 'invalid_body' });
  });

  it('an unknown run is 404 run_not_found; another query parameter is 400', async () => {
    const host = await createTestHost();
    expect(await problem(await host.request('GET', '/api/headless/run_nope/output'))).toMatchObject({ status: 404, code: 'run_not_found' });
    const { taskId } = await host.start('echo x');
    expect(await problem(await host.request('GET', `/api/headless/${taskId}/output?x=1`))).toMatchObject({ status: 400, code: 'invalid_body' });
  });

  it('is kept across a daemon restart', async () => {
    const first = await startFakeDaemon(dirs);
    const { taskId } = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo kept output', agent: 'fake' })).json()) as {
      taskId: string;
    };
    await waitRun(first, taskId);
    expect(await first.stop()).toBe(0);
    const second = await startDaemon(first.dir);
    const body = (await (await api(second, 'GET', `/api/headless/${taskId}/output`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ stdout: 'kept output\n', retained: true, status: 'succeeded' });
    await second.stop();
  });
});
