import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
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

  it("two daemons on one host keep their worktrees in their own data directories: one starting never touches the other's running one", async () => {
    /** A folder with a one-commit repository and a workspace `ws` whose runs each get a worktree. */
    const project = () => {
      const dir = tempDir();
      dirs.push(dir);
      const repo = join(dir, 'repo');
      mkdirSync(repo);
      const git = (...args: string[]) => execFileSync('git', args, { cwd: repo });
      git('init', '--quiet', '--initial-branch=main');
      writeFileSync(join(repo, 'a.txt'), 'a\n');
      git('add', '.');
      git('-c', 'user.email=t@example.com', '-c', 'user.name=T', 'commit', '--quiet', '-m', 'first');
      writeConfig(dir, { workspaces: [{ id: 'ws', path: 'repo', agents: ['fake'], run: { isolation: 'worktree' } }] });
      return dir;
    };
    const [a, b] = [project(), project()];
    const first = await startDaemon(a, ['--port', '0'], { HEADLESS_STORE_URL: await postgres.database() });
    const go = join(a, 'go');
    const run = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: `cwd; wait-file ${go}`, agent: 'fake' })).json()) as {
      taskId: string;
      resumeId: string;
    };
    // The helper gives each daemon HEADLESS_DATA_DIR=<its folder>/.headless: the worktree is there, not in a shared temporary folder.
    const worktree = join(a, '.headless', 'worktrees', 'ws', run.resumeId);
    await waitFor(() => existsSync(worktree), { what: `the run's worktree at ${worktree}` });
    const second = await startDaemon(b, ['--port', '0'], { HEADLESS_STORE_URL: await postgres.database() });
    // The second has swept what its own crash could have left: the first's running worktree is still there.
    expect(existsSync(worktree)).toBe(true);
    writeFileSync(go, '');
    expect(await waitRun(first, run.taskId)).toMatchObject({ status: 'succeeded' });
    const out = (await (await api(first, 'GET', `/api/headless/${run.taskId}/output`)).json()) as { stdout: string };
    expect(out.stdout).toContain(worktree);
    await Promise.all([first.stop(), second.stop()]);
  });
});
