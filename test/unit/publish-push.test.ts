import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pushBranch } from '../../src/core/worktrees/push';
import { type GitHttpServer, startGitHttp } from '../helpers/git-http';

/** docs/worktrees.md: Publishing: the push, against real git remotes. */
const dirs: string[] = [];
const servers: GitHttpServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
const TOKEN = 'ghp_publishTokenForTheTest0123456789';

/** A repository with a run's branch one commit ahead of main, and two bare repositories: the remote, and one a rewrite would send it to. */
function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'publish-push-'));
  dirs.push(dir);
  const repo = join(dir, 'repo');
  mkdirSync(repo);
  git(repo, 'init', '--quiet', '--initial-branch=main');
  git(repo, 'config', 'user.email', 'test@example.com');
  git(repo, 'config', 'user.name', 'Test');
  writeFileSync(join(repo, 'a.txt'), 'a\n');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'first');
  git(repo, 'checkout', '--quiet', '-b', 'headless/ses_1');
  writeFileSync(join(repo, 'b.txt'), 'the run\n');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'the run');
  const sha = git(repo, 'rev-parse', 'HEAD');
  git(repo, 'checkout', '--quiet', 'main');
  const remotes = join(dir, 'remotes');
  mkdirSync(remotes);
  for (const name of ['remote.git', 'elsewhere.git']) git(remotes, 'init', '--quiet', '--bare', name);
  return { dir, repo, sha, commonDir: join(repo, '.git'), remote: join(remotes, 'remote.git'), elsewhere: join(remotes, 'elsewhere.git') };
}

/** What an agent that writes the repository's own git folder would plant: a pre-push hook (in both places git looks) and a rewrite of the remote. */
function plant(repo: string, remote: string, elsewhere: string, marker: string): void {
  const hook = `#!/bin/sh\ntouch ${marker}\n`;
  writeFileSync(join(repo, '.git', 'hooks', 'pre-push'), hook);
  chmodSync(join(repo, '.git', 'hooks', 'pre-push'), 0o755);
  mkdirSync(join(repo, 'hooks'));
  writeFileSync(join(repo, 'hooks', 'pre-push'), hook);
  chmodSync(join(repo, 'hooks', 'pre-push'), 0o755);
  git(repo, 'config', 'core.hooksPath', join(repo, 'hooks'));
  git(repo, 'config', `url.${elsewhere}.insteadOf`, remote);
  git(repo, 'config', `url.${elsewhere}.pushInsteadOf`, remote);
}

const refOf = (bare: string, branch: string) => {
  try {
    return git(bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`);
  } catch {
    return undefined;
  }
};

describe('pushing a run branch', () => {
  it('pushes to a bare repository over a file path, obeying none of the repository configuration: no hook runs, no rewrite applies', async () => {
    const { dir, repo, sha, commonDir, remote, elsewhere } = setUp();
    const marker = join(dir, 'hook-ran');
    plant(repo, remote, elsewhere, marker);
    await pushBranch({ commonDir, sha, branch: 'headless/ses_1', remote });
    expect(refOf(remote, 'headless/ses_1')).toBe(sha);
    expect(git(remote, 'show', `${sha}:b.txt`)).toBe('the run');
    expect(refOf(elsewhere, 'headless/ses_1')).toBeUndefined();
    expect(existsSync(marker)).toBe(false);
  });

  it('never forces: a branch the remote moved elsewhere is refused', async () => {
    const { repo, sha, commonDir, remote } = setUp();
    const main = git(repo, 'rev-parse', 'main');
    await pushBranch({ commonDir, sha: main, branch: 'headless/ses_1', remote });
    git(repo, 'commit', '--quiet', '--allow-empty', '-m', 'elsewhere');
    const other = git(repo, 'rev-parse', 'HEAD');
    await pushBranch({ commonDir, sha: other, branch: 'headless/ses_1', remote });
    await expect(pushBranch({ commonDir, sha, branch: 'headless/ses_1', remote })).rejects.toThrow(/rejected|non-fast-forward|fetch first/);
    expect(refOf(remote, 'headless/ses_1')).toBe(other);
  });

  it("pushes over git's smart HTTP server with the token as basic authentication, on every request", async () => {
    const { dir, sha, commonDir, repo, remote, elsewhere } = setUp();
    const server = await startGitHttp(join(dir, 'remotes'), 'x-access-token', TOKEN);
    servers.push(server);
    const url = `${server.url}remote.git`;
    const marker = join(dir, 'hook-ran');
    plant(repo, url, `${server.url}elsewhere.git`, marker);
    await pushBranch({ commonDir, sha, branch: 'headless/ses_1', remote: url, credential: { username: 'x-access-token', token: TOKEN } });
    expect(refOf(remote, 'headless/ses_1')).toBe(sha);
    expect(refOf(elsewhere, 'headless/ses_1')).toBeUndefined();
    expect(existsSync(marker)).toBe(false);
    const expected = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    expect(server.authorizations.length).toBeGreaterThan(1);
    expect(new Set(server.authorizations)).toEqual(new Set([expected]));
  });

  it('a wrong token is refused by the server, and the error does not hold the token', async () => {
    const { dir, sha, commonDir, remote } = setUp();
    const server = await startGitHttp(join(dir, 'remotes'), 'x-access-token', TOKEN);
    servers.push(server);
    const wrong = 'ghp_notTheRightTokenAtAll000000000000';
    const push = pushBranch({
      commonDir,
      sha,
      branch: 'headless/ses_1',
      remote: `${server.url}remote.git`,
      credential: { username: 'x-access-token', token: wrong },
    });
    const error = await push.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/401|Authentication failed|could not read Username/);
    expect(error?.message).not.toContain(wrong);
    expect(refOf(remote, 'headless/ses_1')).toBeUndefined();
  });
});
