import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/contract/records';
import { api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { FAKE_AGENT } from '../helpers/harness';
import { type GitHttpServer, startGitHttp } from '../helpers/git-http';

/** docs/worktrees.md: Publishing, through the built daemon: a hostile agent's run pushed over git's smart HTTP server. */
const dirs: string[] = [];
const servers: GitHttpServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
  await cleanupDaemons(dirs);
});
const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
const TOKEN = 'ghs_publishTokenTheAgentMustNotSee42';

/** A repository whose hooks are husky's (`core.hooksPath = .husky`, read in whatever folder git runs), and a bare remote behind git's HTTP server. */
async function setUp(): Promise<{ dir: string; repo: string; remote: string; server: GitHttpServer }> {
  const dir = tempDir();
  dirs.push(dir);
  const repo = join(dir, 'repo');
  mkdirSync(repo);
  git(repo, 'init', '--quiet', '--initial-branch=main');
  git(repo, 'config', 'user.email', 'test@example.com');
  git(repo, 'config', 'user.name', 'Test');
  git(repo, 'config', 'core.hooksPath', '.husky');
  writeFileSync(join(repo, 'a.txt'), 'a\n');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'first');
  const remotes = join(dir, 'remotes');
  mkdirSync(remotes);
  git(remotes, 'init', '--quiet', '--bare', 'remote.git');
  const server = await startGitHttp(remotes, 'x-access-token', TOKEN);
  servers.push(server);
  return { dir, repo, remote: join(remotes, 'remote.git'), server };
}

/** What the agent tries: its environment, every process's it sees, git's configuration, files where a token could lie; and a pre-push hook. */
const hostile = (marker: string) =>
  [
    'dump-env',
    "sh cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' > found-environ.txt",
    'sh git config --list --show-origin > found-gitconfig.txt 2>&1',
    `sh grep -rslF ${TOKEN} "$HOME" /tmp /etc /run . "$(git rev-parse --git-common-dir)" > found-files.txt 2>/dev/null || echo none-found`,
    `sh mkdir -p .husky && printf '#!/bin/sh\\ntouch ${marker}\\n' > .husky/pre-push && chmod +x .husky/pre-push && echo planted`,
  ].join('; ');

describe.skipIf(!hasBwrap)('publishing a sandboxed run', () => {
  it('pushes its branch with the token the agent could not find, and the hook it planted does not run', async () => {
    const { dir, remote, server } = await setUp();
    const url = `${server.url}remote.git`;
    writeConfig(dir, {
      sandbox: { readable: [FAKE_AGENT] },
      workspaces: [
        {
          id: 'ws',
          path: 'repo',
          agents: ['fake'],
          run: { isolation: 'worktree', sandbox: true, publish: {} },
          publishTo: { remote: url, token: { env: 'PUBLISH_TOKEN' } },
        },
      ],
    });
    const daemon = await startDaemon(dir, ['--port', '0'], { PUBLISH_TOKEN: TOKEN });
    const marker = join(dir, 'hook-ran');
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: hostile(marker), timeoutMs: 120_000 });
    expect(res.status, await res.clone().text()).toBe(202);
    const { taskId } = (await res.json()) as { taskId: string };
    const run = (await waitRun(daemon, taskId)) as RunRecord;
    const output = ((await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;
    expect(output).toContain('planted');
    expect(run).toMatchObject({ status: 'succeeded', publish: { pushed: { remote: url, branch: run.changes?.branch, sha: run.changes?.head } } });
    expect(run.publish?.error).toBeUndefined();
    const sha = run.changes?.head ?? '';
    expect(git(remote, 'rev-parse', `refs/heads/${run.changes?.branch}`)).toBe(sha);
    // What the agent found, pushed with its work: nothing of the token, nor its variable.
    for (const file of ['found-environ.txt', 'found-gitconfig.txt', 'found-files.txt']) {
      const found = git(remote, 'show', `${sha}:${file}`);
      expect(found, file).not.toContain(TOKEN);
      expect(found, file).not.toContain('PUBLISH_TOKEN');
    }
    expect(git(remote, 'show', `${sha}:found-environ.txt`)).toContain('HEADLESS_TASK_ID');
    expect(output).not.toContain(TOKEN);
    expect(output).not.toContain('PUBLISH_TOKEN');
    expect(JSON.stringify(run)).not.toContain(TOKEN);
    expect(git(remote, 'show', `${sha}:.husky/pre-push`)).toContain(marker);
    expect(existsSync(marker)).toBe(false);
    const basic = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    expect(new Set(server.authorizations)).toEqual(new Set([basic]));
  });
});

describe('publishing', () => {
  it('records why a run that failed is not published, and a push the remote refuses without failing the run', async () => {
    const { dir, remote, server } = await setUp();
    writeConfig(dir, {
      workspaces: [
        {
          id: 'ws',
          path: 'repo',
          agents: ['fake'],
          run: { isolation: 'worktree', publish: {} },
          publishTo: { remote: `${server.url}remote.git`, token: 'ghs_notTheTokenTheServerWants000' },
        },
      ],
    });
    const daemon = await startDaemon(dir);
    const start = async (prompt: string) => {
      const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt, timeoutMs: 120_000 });
      expect(res.status, await res.clone().text()).toBe(202);
      return (await waitRun(daemon, ((await res.json()) as { taskId: string }).taskId)) as RunRecord;
    };
    const failed = await start('sh echo x > x.txt; exit 3');
    expect(failed).toMatchObject({ status: 'failed', publish: { skipped: 'the run ended failed' } });
    const refused = await start('sh echo y > y.txt');
    expect(refused).toMatchObject({ status: 'succeeded', publish: { error: { code: 'push_failed' } } });
    expect(refused.publish?.pushed).toBeUndefined();
    expect(git(remote, 'for-each-ref')).toBe('');
    const ws = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', publish: { pullRequest: {} } });
    expect(ws.status).toBe(403);
  });
});
