import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';

/** The daemon on a real PostgreSQL (docs/deployment.md: Running several instances). */

const dirs: string[] = [];
let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
}, 600_000);
afterAll(async () => {
  cleanupDaemons(dirs);
  await postgres?.stop();
});

function daemonDir(): string {
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir);
  return dir;
}

describe('headless-run-webhook serve --store postgres://…', () => {
  it('keeps runs, events, output and Sessions in PostgreSQL, across a restart and another data dir', async () => {
    const url = await postgres.database();
    const first = await startDaemon(daemonDir(), ['--port', '0'], { HEADLESS_STORE_URL: url });
    const started = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: 'session pg-1; echo stored', agent: 'fake' })).json()) as {
      taskId: string;
      resumeId: string;
    };
    await waitRun(first, started.taskId);
    expect(await first.stop()).toBe(0);
    // Another folder, the same database: everything is there.
    const second = await startDaemon(daemonDir(), ['--port', '0', '--store', url]);
    expect(await (await api(second, 'GET', `/api/headless/${started.taskId}`)).json()).toMatchObject({ status: 'succeeded' });
    expect(await (await api(second, 'GET', `/api/headless/${started.taskId}/output`)).json()).toMatchObject({ stdout: 'session=pg-1\nstored\n' });
    const events = (await (await api(second, 'GET', `/api/headless/${started.taskId}/events?format=json`)).json()) as { events: Array<{ type: string }> };
    expect(events.events.map((e) => e.type)).toEqual(['run.started', 'agent.session', 'run.ended']);
    expect(await (await api(second, 'GET', `/api/sessions/${started.resumeId}`)).json()).toMatchObject({ resumable: true });
    const list = (await (await api(second, 'GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string }> };
    expect(list.runs.map((r) => r.taskId)).toEqual([started.taskId]);
    await second.stop();
  });

  it('a --store that is not a postgres:// URL is bad usage', async () => {
    const bad = await runCli(['serve', '--port', '0', '--store', 'mysql://x'], { cwd: daemonDir() });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--store must be a postgres:\/\/ URL/);
  });
});
