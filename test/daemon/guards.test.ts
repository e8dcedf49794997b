import { afterAll, expect, it } from 'vitest';
import { api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { fakeAgent } from '../helpers/harness';

/** docs/configuration.md, Guards: the config file's settings reach the runs of the built daemon. */
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

it('a workspace stall limit from the config file stops a silent run; the installation memory ceiling is set there too', async () => {
  const cwd = tempDir();
  dirs.push(cwd);
  writeConfig(cwd, {
    maxMemoryMb: 4096,
    minFreeMemoryMb: 1,
    agents: { fake: fakeAgent },
    workspaces: [{ id: 'ws', path: '.', agents: ['fake'], run: { stallTimeoutMs: 1000 } }],
  });
  const daemon = await startDaemon(cwd);
  const started = (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi; sleep 60000', timeoutMs: 120_000 })).json()) as {
    taskId: string;
  };
  expect(await waitRun(daemon, started.taskId)).toMatchObject({ status: 'timed_out', error: { code: 'stalled' } });
  await daemon.stop();
});
