import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunChangesView, RunRecord } from '../../src/contract/records';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { FAKE_AGENT } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { escapeUser } from '../helpers/users';

/** docs/worktrees.md: a git worktree per run, with real git, through the built daemon. */
const dirs: string[] = [];
afterEach(() => cleanupDaemons(dirs));
const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);

const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();

/** A folder with a repository `repo` (one commit: a.txt, c.txt) and a config whose workspace `ws` runs each run in a worktree. */
function setUp(workspace: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): { dir: string; repo: string } {
  const dir = tempDir();
  dirs.push(dir);
  const repo = join(dir, 'repo');
  mkdirSync(repo);
  git(repo, 'init', '--quiet', '--initial-branch=main');
  git(repo, 'config', 'user.email', 'test@example.com');
  git(repo, 'config', 'user.name', 'Test');
  writeFileSync(join(repo, 'a.txt'), 'a\n');
  writeFileSync(join(repo, 'c.txt'), 'c\n');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'first');
  writeConfig(dir, {
    workspaces: [{ id: 'ws', path: 'repo', agents: ['fake'], ...workspace, run: { isolation: 'worktree', ...(workspace.run as object) } }],
    ...extra,
  });
  return { dir, repo };
}

async function start(daemon: Daemon, body: Record<string, unknown>): Promise<{ taskId: string; resumeId: string }> {
  const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { timeoutMs: 120_000, ...body });
  expect(res.status, await res.clone().text()).toBe(202);
  return (await res.json()) as { taskId: string; resumeId: string };
}

const stdoutOf = async (daemon: Daemon, taskId: string) =>
  ((await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;
/** A worktree is removed once the run's final record is durable: a moment after it reads as ended. */
const gone = (path: string) => waitFor(() => !existsSync(path), { what: `${path} to be removed` });
const noBranch = (repo: string, branch: string) => waitFor(() => git(repo, 'branch', '--list', branch) === '', { what: `branch ${branch} to be deleted` });

const changesOf = async (daemon: Daemon, taskId: string) => (await (await api(daemon, 'GET', `/api/headless/${taskId}/changes`)).json()) as RunChangesView;

describe('a run in a worktree', () => {
  it('two runs from one ref at once never see each other, each change is reported, and the workspace is untouched', async () => {
    const { dir, repo } = setUp();
    const daemon = await startDaemon(dir);
    const marks = join(dir, 'marks');
    mkdirSync(marks);
    const step = (me: string, other: string) =>
      `sh echo from ${me} > ${me}.txt && touch ${marks}/${me}; wait-file ${marks}/${other}; sh test -e ${other}.txt && echo SAW-${other} || echo alone; cwd`;
    const a = await start(daemon, { prompt: step('A', 'B') });
    const b = await start(daemon, { prompt: step('B', 'A') });
    const [ra, rb] = (await Promise.all([waitRun(daemon, a.taskId), waitRun(daemon, b.taskId)])) as RunRecord[];
    const pairs: Array<[RunRecord, string]> = [
      [ra as RunRecord, 'A'],
      [rb as RunRecord, 'B'],
    ];
    for (const [run, me] of pairs) {
      expect(run).toMatchObject({ status: 'succeeded', policy: { worktree: { ref: 'HEAD' } } });
      const out = await stdoutOf(daemon, run.taskId);
      expect(out).toContain('alone');
      expect(out).not.toContain('SAW-');
      expect(out).toContain(join(dir, '.headless', 'worktrees', 'ws', run.resumeId));
      expect(run.changes).toMatchObject({ branch: `headless/${run.resumeId}`, committed: true, files: [{ path: `${me}.txt`, status: 'added' }] });
      expect(run.changes?.base).toBe(git(repo, 'rev-parse', 'main'));
      expect(run.changes?.worktree).toBe(join(dir, '.headless', 'worktrees', 'ws', run.resumeId));
      expect(readFileSync(join(run.changes?.worktree ?? '', `${me}.txt`), 'utf8')).toBe(`from ${me}\n`);
      const view = await changesOf(daemon, run.taskId);
      expect(view).toMatchObject({ taskId: run.taskId, changes: run.changes, patchTruncated: false });
      expect(view.patch).toContain(`+from ${me}`);
      // The branch holds the work: the service committed what the agent left.
      expect(git(repo, 'show', `headless/${run.resumeId}:${me}.txt`)).toBe(`from ${me}`);
    }
    expect(git(repo, 'status', '--porcelain')).toBe('');
    expect(existsSync(join(repo, 'A.txt')) || existsSync(join(repo, 'B.txt'))).toBe(false);
    await daemon.stop();
  });

  it('a run that changes nothing leaves no worktree and no branch; renames, deletions and its own commits are reported', async () => {
    const { dir, repo } = setUp();
    const daemon = await startDaemon(dir);
    const idle = await start(daemon, { prompt: 'echo nothing' });
    const idleRun = (await waitRun(daemon, idle.taskId)) as RunRecord;
    expect(idleRun.changes).toMatchObject({ files: [], committed: false, worktree: null });
    expect(idleRun.changes?.head).toBe(idleRun.changes?.base);
    await gone(join(dir, '.headless', 'worktrees', 'ws', idle.resumeId));
    await noBranch(repo, `headless/${idle.resumeId}`);

    const busy = await start(daemon, {
      prompt: 'sh git mv a.txt b.txt && git rm --quiet c.txt && git -c user.name=agent -c user.email=a@b commit --quiet -m agent && echo d > d.txt',
    });
    const run = (await waitRun(daemon, busy.taskId)) as RunRecord;
    expect(await stdoutOf(daemon, busy.taskId)).toContain('sh exit 0');
    expect(run.changes?.committed).toBe(true);
    expect(run.changes?.files).toEqual(
      expect.arrayContaining([
        { path: 'b.txt', status: 'renamed', from: 'a.txt' },
        { path: 'c.txt', status: 'deleted' },
        { path: 'd.txt', status: 'added' },
      ]),
    );
    expect(run.changes?.files).toHaveLength(3);
    expect(git(repo, 'log', '--format=%s', `headless/${busy.resumeId}`).split('\n').slice(0, 2)).toEqual([
      `headless-run-webhook: work left uncommitted by run ${busy.taskId}`,
      'agent',
    ]);
    await daemon.stop();
  });

  it("a resume continues in its Session's worktree, from where the last run left it", async () => {
    const { dir } = setUp();
    const daemon = await startDaemon(dir);
    const first = await start(daemon, { prompt: 'session s1; sh echo one > x.txt' });
    const one = (await waitRun(daemon, first.taskId)) as RunRecord;
    const second = await start(daemon, { prompt: 'sh cat x.txt && echo two >> x.txt; cwd', resumeId: first.resumeId });
    const two = (await waitRun(daemon, second.taskId)) as RunRecord;
    expect(await stdoutOf(daemon, second.taskId)).toContain('one\n');
    expect(two.changes?.base).toBe(one.changes?.head);
    expect(two.changes?.branch).toBe(one.changes?.branch);
    expect(two.changes?.files).toEqual([{ path: 'x.txt', status: 'modified' }]);
    expect((await changesOf(daemon, second.taskId)).patch).toContain('+two');
    await daemon.stop();
  });

  it('refuses, with a problem, a workspace that is no repository, a ref it does not have and a ref that is no ref; a run elsewhere has no changes', async () => {
    const { dir } = setUp();
    mkdirSync(join(dir, 'plain'));
    writeConfig(dir, {
      workspaces: [
        { id: 'ws', path: 'repo', agents: ['fake'] },
        { id: 'plain', path: 'plain', agents: ['fake'], run: { isolation: 'worktree' } },
      ],
    });
    const daemon = await startDaemon(dir);
    const plain = await api(daemon, 'POST', '/api/workspaces/plain/headless', { prompt: 'echo hi' });
    expect(plain.status).toBe(422);
    expect(await plain.json()).toMatchObject({ code: 'worktree_unavailable', detail: expect.stringContaining('not in a git repository') });
    const unknown = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', isolation: 'worktree', ref: 'no-such-branch' });
    expect(unknown.status).toBe(422);
    expect(await unknown.json()).toMatchObject({ code: 'worktree_unavailable', detail: expect.stringContaining('no-such-branch') });
    for (const ref of ['--upload-pack=x', 'a..b', 'HEAD@{1}', 'a b']) {
      const bad = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', isolation: 'worktree', ref });
      expect(bad.status, ref).toBe(400);
      expect(await bad.json()).toMatchObject({ code: 'invalid_body', detail: expect.stringContaining('"ref"') });
    }
    const elsewhere = await start(daemon, { prompt: 'echo hi' });
    expect((await waitRun(daemon, elsewhere.taskId)) as RunRecord).not.toHaveProperty('changes');
    const none = await api(daemon, 'GET', `/api/headless/${elsewhere.taskId}/changes`);
    expect(none.status).toBe(404);
    expect(await none.json()).toMatchObject({ code: 'changes_not_found', detail: expect.stringContaining('did not run in a worktree') });
    const tagged = await start(daemon, { prompt: 'cwd', isolation: 'worktree', ref: 'main~0' });
    expect(((await waitRun(daemon, tagged.taskId)) as RunRecord).policy).toEqual({ permissions: 'full', sandbox: false, worktree: { ref: 'main~0' } });
    await daemon.stop();
  });

  it("runs the workspace's setup command in each new worktree; a failing setup fails the run with its own code and leaves nothing", async () => {
    const { dir, repo } = setUp({ worktree: { setup: 'cp "$HEADLESS_WORKSPACE_PATH/.env" .env && echo set up' } });
    writeFileSync(join(repo, '.env'), 'SECRET=from-the-workspace\n');
    const daemon = await startDaemon(dir);
    const ok = await start(daemon, { prompt: 'session e1; sh cat .env && echo work > work.txt' });
    const first = (await waitRun(daemon, ok.taskId)) as RunRecord;
    expect(await stdoutOf(daemon, ok.taskId)).toContain('SECRET=from-the-workspace');
    // What the setup left is not the run's work: never committed, in this run or a resume.
    expect(first.changes?.files).toEqual([{ path: 'work.txt', status: 'added' }]);
    const resumed = await start(daemon, { prompt: 'sh echo more >> work.txt && echo SECRET=changed > .env', resumeId: ok.resumeId });
    expect(((await waitRun(daemon, resumed.taskId)) as RunRecord).changes?.files).toEqual([{ path: 'work.txt', status: 'modified' }]);
    expect(git(repo, 'log', '--format=%H', `headless/${ok.resumeId}`, '--', '.env')).toBe('');
    await daemon.stop();

    writeConfig(dir, {
      workspaces: [{ id: 'ws', path: 'repo', agents: ['fake'], run: { isolation: 'worktree' }, worktree: { setup: 'echo broken install >&2 && exit 3' } }],
    });
    const again = await startDaemon(dir);
    const answer = await api(again, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo never' });
    expect(answer.status).toBe(500);
    const { taskId } = (await answer.json()) as { taskId: string };
    const run = (await waitRun(again, taskId)) as RunRecord;
    expect(run).toMatchObject({ status: 'failed', error: { code: 'worktree_setup_failed', message: expect.stringContaining('broken install') } });
    expect(existsSync(join(dir, '.headless', 'worktrees', 'ws', run.resumeId))).toBe(false);
    expect(git(repo, 'branch', '--list', `headless/${run.resumeId}`)).toBe('');
    await again.stop();
  });

  it('cleanup "always" removes the folder and keeps the branch with the work; "never" keeps an unchanged worktree', async () => {
    const { dir, repo } = setUp({ worktree: { cleanup: 'always' } });
    const daemon = await startDaemon(dir);
    const made = await start(daemon, { prompt: 'session k1; sh echo kept > k.txt' });
    const run = (await waitRun(daemon, made.taskId)) as RunRecord;
    expect(run.changes?.worktree).toBeNull();
    await gone(join(dir, '.headless', 'worktrees', 'ws', made.resumeId));
    expect(git(repo, 'show', `headless/${made.resumeId}:k.txt`)).toBe('kept');
    // Its Session goes on from its branch, in a new worktree.
    const resumed = await start(daemon, { prompt: 'sh cat k.txt', resumeId: made.resumeId });
    await waitRun(daemon, resumed.taskId);
    expect(await stdoutOf(daemon, resumed.taskId)).toContain('kept\n');
    await daemon.stop();

    writeConfig(dir, { workspaces: [{ id: 'ws', path: 'repo', agents: ['fake'], run: { isolation: 'worktree' }, worktree: { cleanup: 'never' } }] });
    const again = await startDaemon(dir);
    const idle = await start(again, { prompt: 'echo nothing' });
    expect(((await waitRun(again, idle.taskId)) as RunRecord).changes?.worktree).toBe(join(dir, '.headless', 'worktrees', 'ws', idle.resumeId));
    expect(existsSync(join(dir, '.headless', 'worktrees', 'ws', idle.resumeId))).toBe(true);
    await again.stop();
  });
});

describe('worktree pitfalls (docs/worktrees.md)', () => {
  it('a submodule is checked out; LFS files without git-lfs are left as pointers; a relative hooksPath still runs its hooks', async () => {
    const { dir, repo } = setUp();
    const sub = join(dir, 'sub');
    mkdirSync(sub);
    git(sub, 'init', '--quiet');
    writeFileSync(join(sub, 's.txt'), 'in the submodule\n');
    git(sub, 'add', '.');
    git(sub, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '--quiet', '-m', 's');
    git(repo, '-c', 'protocol.file.allow=always', 'submodule', 'add', '--quiet', sub, 'sub');
    writeFileSync(join(repo, '.gitattributes'), '*.bin filter=lfs diff=lfs merge=lfs -text\n');
    writeFileSync(join(repo, 'big.bin'), 'version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '--quiet', '-m', 'sub and lfs');
    // As `git lfs install` would leave it, with no git-lfs on the PATH.
    git(repo, 'config', 'filter.lfs.process', 'git-lfs filter-process');
    git(repo, 'config', 'filter.lfs.required', 'true');
    // husky's layout: hooks in an ignored folder, named by a relative path.
    mkdirSync(join(repo, '.hooks'));
    writeFileSync(join(repo, '.gitignore'), '.hooks/\n');
    writeFileSync(join(repo, '.hooks', 'pre-commit'), `#!/bin/sh\ntouch "${join(dir, 'hook-ran')}"\n`, { mode: 0o755 });
    git(repo, 'config', 'core.hooksPath', '.hooks');
    // A local submodule is fetched over the file protocol, which git allows only when told.
    const env = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'protocol.file.allow', GIT_CONFIG_VALUE_0: 'always' };
    const daemon = await startDaemon(dir, ['--port', '0'], env);
    const run = await start(daemon, { prompt: 'sh cat sub/s.txt && head -1 big.bin' });
    expect(await waitRun(daemon, run.taskId)).toMatchObject({ status: 'succeeded' });
    const out = await stdoutOf(daemon, run.taskId);
    expect(out).toContain('in the submodule');
    expect(out).toContain('version https://git-lfs.github.com/spec/v1');
    // The agent's own commit (LFS switched off: without git-lfs, the repository's git fails anywhere).
    // The service may still hold the repository's config lock, releasing the ended run's worktree (its branch's section).
    const unset = (key: string) => spawnSync('git', ['config', '--unset', key], { cwd: repo, encoding: 'utf8' });
    await waitFor(() => unset('filter.lfs.process').status === 0, { what: 'the config to be free of the release' });
    await waitFor(() => unset('filter.lfs.required').status === 0, { what: 'the config to be free of the release' });
    const committing = await start(daemon, { prompt: 'sh echo x > x.txt && git add x.txt && git -c user.name=a -c user.email=a@b commit --quiet -m x' });
    await waitRun(daemon, committing.taskId);
    expect(existsSync(join(dir, 'hook-ran')), await stdoutOf(daemon, committing.taskId)).toBe(true);
    await daemon.stop();
  });

  it('a worktree whose folder was deleted (its branch still checked out there) is pruned, and the Session goes on', async () => {
    const { dir, repo } = setUp({ worktree: { cleanup: 'never' } });
    const daemon = await startDaemon(dir);
    const first = await start(daemon, { prompt: 'session o1; sh echo one > one.txt' });
    const one = (await waitRun(daemon, first.taskId)) as RunRecord;
    // Removed while still locked, as when it goes before the run has released it (the worse order, made certain).
    try {
      git(repo, 'worktree', 'lock', one.changes?.worktree ?? '');
    } catch {
      // Not yet released: still locked.
    }
    rmSync(one.changes?.worktree ?? '', { recursive: true, force: true });
    const second = await start(daemon, { prompt: 'sh cat one.txt', resumeId: first.resumeId });
    expect(await waitRun(daemon, second.taskId)).toMatchObject({ status: 'succeeded' });
    expect(await stdoutOf(daemon, second.taskId)).toContain('one\n');
    await daemon.stop();
  });
});

describe('worktrees and crashes', () => {
  it('a daemon killed -9 mid-run: the run is interrupted with its change (its work committed), its worktree kept', async () => {
    const { dir, repo } = setUp();
    const daemon = await startDaemon(dir);
    const mark = join(dir, 'written');
    const run = await start(daemon, { prompt: `sh echo half > half.txt && touch ${mark}; sleep 600000` });
    await waitFor(() => existsSync(mark), { what: 'the agent to write' });
    daemon.child.kill('SIGKILL');
    await daemon.stop();
    const again = await startDaemon(dir);
    const ended = (await waitRun(again, run.taskId)) as RunRecord;
    expect(ended).toMatchObject({ status: 'interrupted', changes: { committed: true, files: [{ path: 'half.txt', status: 'added' }] } });
    expect(git(repo, 'show', `headless/${run.resumeId}:half.txt`)).toBe('half');
    // The record names its kept folder: the restart's sweep leaves it there (it had removed it).
    const kept = ended.changes?.worktree;
    expect(kept).toEqual(expect.any(String));
    await again.stop();
    expect(existsSync(kept as string)).toBe(true);
    expect(git(repo, 'worktree', 'list', '--porcelain')).toContain(`worktree ${kept}`);
    expect(git(repo, 'worktree', 'list', '--porcelain')).not.toContain('locked');
  });

  it('killed -9 while its worktree was being set up: the sweep at the next start removes what it left', async () => {
    const { dir, repo } = setUp({ worktree: { setup: `touch "${'$HEADLESS_WORKTREE_PATH'}/../setting-up" && sleep 600` } });
    const daemon = await startDaemon(dir);
    // Its answer comes once the worktree is set up: it never does.
    void api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo never' }).catch(() => undefined);
    const mark = join(dir, '.headless', 'worktrees', 'ws', 'setting-up');
    await waitFor(() => existsSync(mark), { what: 'the setup command to start' });
    const locked = /locked headless-run-webhook: run (\S+)/.exec(git(repo, 'worktree', 'list', '--porcelain'));
    expect(locked).not.toBeNull();
    daemon.child.kill('SIGKILL');
    await daemon.stop();
    const again = await startDaemon(dir);
    const run = (await waitRun(again, locked?.[1] ?? '')) as RunRecord;
    expect(run).toMatchObject({ status: 'interrupted' });
    expect(git(repo, 'worktree', 'list', '--porcelain')).not.toContain(run.resumeId);
    expect(existsSync(join(dir, '.headless', 'worktrees', 'ws', run.resumeId))).toBe(false);
    expect(git(repo, 'branch', '--list', `headless/${run.resumeId}`)).toBe('');
    await again.stop();
  });
});

describe.skipIf(!hasBwrap)('a sandboxed run in a worktree', () => {
  it("sees its worktree and reads its repository, but not the workspace's files; the service commits its work", async () => {
    const { dir, repo } = setUp({ run: { sandbox: true } }, { sandbox: { readable: [FAKE_AGENT] } });
    writeFileSync(join(repo, 'uncommitted.txt'), 'only in the workspace\n');
    const daemon = await startDaemon(dir);
    const run = await start(daemon, {
      prompt: `sh echo inside > in.txt && git log --format=%s -1 && (test -e ${repo}/uncommitted.txt && echo SAW-WORKSPACE || echo workspace-hidden) && (git add in.txt 2>/dev/null && echo ADDED || echo git-read-only)`,
    });
    const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
    const out = await stdoutOf(daemon, run.taskId);
    expect(out, JSON.stringify(ended)).toContain('first');
    expect(out).toContain('workspace-hidden');
    expect(out).toContain('git-read-only');
    expect(ended.changes).toMatchObject({ committed: true, files: [{ path: 'in.txt', status: 'added' }] });
    expect(git(repo, 'show', `headless/${run.resumeId}:in.txt`)).toBe('inside');
    await daemon.stop();
  });
});

/** A script that writes a marker: the proof that whoever ran it ran it. */
function marker(dir: string, name: string): { script: string; mark: string } {
  const mark = join(dir, `${name}-ran`);
  const script = join(dir, `${name}.sh`);
  // A filter passes its input on; an fsmonitor hook reads none.
  writeFileSync(script, `#!/bin/sh\ntouch "${mark}"\n${name === 'fsmonitor' ? '' : 'cat\n'}`, { mode: 0o755 });
  return { script, mark };
}

describe('the service never runs what an agent wrote (issue 50)', () => {
  it("a .git the agent replaced with a repository of its own (fsmonitor, a clean filter) is never read: the work goes to the run's branch", async () => {
    const { dir, repo } = setUp();
    const fsmonitor = marker(dir, 'fsmonitor');
    const clean = marker(dir, 'clean');
    const daemon = await startDaemon(dir);
    // The agent's own git never runs after it plants its repository: only the service's could run them.
    const plant = [
      'rm .git && git init --quiet . 2>&1',
      `git config core.fsmonitor ${fsmonitor.script}`,
      `git config filter.evil.clean ${clean.script}`,
      "echo '* filter=evil' > .gitattributes && echo work > work.txt",
    ].join(' && ');
    const run = await start(daemon, { prompt: `sh ${plant}` });
    const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
    expect(await stdoutOf(daemon, run.taskId)).toContain('sh exit 0');
    expect(existsSync(fsmonitor.mark)).toBe(false);
    expect(existsSync(clean.mark)).toBe(false);
    expect(ended.changes).toMatchObject({ branch: `headless/${run.resumeId}`, committed: true });
    expect(git(repo, 'show', `headless/${run.resumeId}:work.txt`)).toBe('work');
    // The kept worktree is git's again.
    expect(git(ended.changes?.worktree ?? '', 'rev-parse', '--abbrev-ref', 'HEAD')).toBe(`headless/${run.resumeId}`);
    await daemon.stop();
  });

  it("a .git pointed at the repository's own git folder does not make the service commit onto main", async () => {
    const { dir, repo } = setUp();
    const main = git(repo, 'rev-parse', 'main');
    const daemon = await startDaemon(dir);
    const run = await start(daemon, { prompt: `sh echo "gitdir: ${join(repo, '.git')}" > .git && echo evil > evil.txt` });
    const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
    expect(git(repo, 'rev-parse', 'main')).toBe(main);
    expect(git(repo, 'log', '--format=%s', 'main')).toBe('first');
    expect(ended.changes).toMatchObject({ branch: `headless/${run.resumeId}`, committed: true, files: [{ path: 'evil.txt', status: 'added' }] });
    expect(git(repo, 'show', `headless/${run.resumeId}:evil.txt`)).toBe('evil');
    await daemon.stop();
  });

  it("the repository's own configuration (as an agent in its folder could write it: fsmonitor, filters, an include) is not obeyed", async () => {
    const { dir, repo } = setUp();
    const fsmonitor = marker(dir, 'fsmonitor');
    const clean = marker(dir, 'clean');
    const smudge = marker(dir, 'smudge');
    writeFileSync(join(repo, '.gitattributes'), '*.txt filter=evil\n');
    git(repo, 'add', '.gitattributes');
    git(repo, 'commit', '--quiet', '-m', 'attributes');
    writeFileSync(join(dir, 'included.config'), `[filter "evil"]\n\tclean = ${clean.script}\n\tsmudge = ${smudge.script}\n`);
    git(repo, 'config', 'include.path', join(dir, 'included.config'));
    git(repo, 'config', 'core.fsmonitor', fsmonitor.script);
    const daemon = await startDaemon(dir);
    const run = await start(daemon, { prompt: 'sh echo more >> a.txt && echo new > new.txt' });
    const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
    expect(ended.changes?.committed, JSON.stringify(ended)).toBe(true);
    expect([fsmonitor.mark, clean.mark, smudge.mark].filter((mark) => existsSync(mark))).toEqual([]);
    await daemon.stop();
  });

  it.each([
    ['onbranch:headless/**', 'the new branch'],
    ['gitdir:**/worktrees/**', "a worktree's git folder"],
  ])('an include whose condition holds only in the checkout it makes (includeIf %s: %s) is still not obeyed', async (condition) => {
    const { dir, repo } = setUp();
    const smudge = marker(dir, 'smudge');
    // As an agent in the repository's own folder could leave it: attributes in .git/info, a relative conditional include.
    writeFileSync(join(repo, '.git', 'info', 'attributes'), '*.txt filter=y\n');
    writeFileSync(join(repo, '.git', 'incif.cfg'), `[filter "y"]\n\tsmudge = ${smudge.script} smudge\n`);
    writeFileSync(join(repo, '.git', 'config'), `${readFileSync(join(repo, '.git', 'config'), 'utf8')}[includeIf "${condition}"]\n\tpath = incif.cfg\n`);
    const daemon = await startDaemon(dir);
    const run = await start(daemon, { prompt: 'sh cat a.txt && echo new > new.txt' });
    const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
    expect(ended.changes?.committed, JSON.stringify(ended)).toBe(true);
    expect(await stdoutOf(daemon, run.taskId)).toContain('a\n');
    expect(existsSync(smudge.mark)).toBe(false);
    await daemon.stop();
  });

  it('a repository whose configuration includes a file the service cannot read is refused, and nothing runs', async () => {
    const { dir, repo } = setUp();
    writeFileSync(
      join(repo, '.git', 'config'),
      `${readFileSync(join(repo, '.git', 'config'), 'utf8')}[includeIf "onbranch:headless/**"]\n\tpath = ${join(dir, 'missing.cfg')}\n`,
    );
    const daemon = await startDaemon(dir);
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo never' });
    expect(res.status).toBe(422);
    expect(await res.text()).toContain('missing.cfg');
    await daemon.stop();
  });

  it("setup runs on a worktree fresh from the ref, never on one made again from a Session's branch (agent-written)", async () => {
    const outside = tempDir();
    dirs.push(outside);
    const setupRan = join(outside, 'setup-ran');
    const preinstall = join(outside, 'preinstall-ran');
    // As `npm ci` runs a package's preinstall script: the setup runs what the worktree holds.
    const { dir, repo } = setUp({ worktree: { cleanup: 'always', setup: `echo x >> "${setupRan}" && if [ -x ./preinstall.sh ]; then ./preinstall.sh; fi` } });
    const daemon = await startDaemon(dir);
    const first = await start(daemon, { prompt: `session p1; sh printf '#!/bin/sh\\ntouch ${preinstall}\\n' > preinstall.sh && chmod +x preinstall.sh` });
    await waitRun(daemon, first.taskId);
    expect(readFileSync(setupRan, 'utf8')).toBe('x\n');
    expect(git(repo, 'show', `headless/${first.resumeId}:preinstall.sh`)).toContain(preinstall);
    await gone(join(dir, '.headless', 'worktrees', 'ws', first.resumeId));
    // The resume finds no folder: its worktree is made again from the branch the agent wrote.
    const resumed = await start(daemon, { prompt: 'sh cat preinstall.sh', resumeId: first.resumeId });
    expect(await waitRun(daemon, resumed.taskId)).toMatchObject({ status: 'succeeded' });
    // A new Session started from another Session's branch: the same.
    const other = await start(daemon, { prompt: 'sh ls', ref: `headless/${first.resumeId}`, isolation: 'worktree' });
    expect(await waitRun(daemon, other.taskId)).toMatchObject({ status: 'succeeded' });
    expect(existsSync(preinstall)).toBe(false);
    expect(readFileSync(setupRan, 'utf8')).toBe('x\n');
    await daemon.stop();
  });

  it('leftovers past the ceiling (a huge file, too many files) are not committed: the run keeps its outcome, the record says why, the worktree stays', async () => {
    const { dir, repo } = setUp({ worktree: { cleanup: 'always' } });
    const daemon = await startDaemon(dir);
    const big = await start(daemon, { prompt: 'sh truncate -s 200M big.bin && echo small > small.txt' });
    const many = await start(daemon, { prompt: 'sh mkdir many && cd many && seq 1 10001 | xargs touch' });
    for (const [run, why] of [
      [big, /bytes, more than/],
      [many, /more than 10000 files/],
    ] as const) {
      const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
      expect(ended.status).toBe('succeeded');
      expect(ended.changes).toMatchObject({ committed: false, files: [], notCommitted: expect.stringMatching(why) });
      expect(ended.changes?.worktree).toBe(join(dir, '.headless', 'worktrees', 'ws', run.resumeId));
      expect(git(repo, 'rev-parse', `headless/${run.resumeId}`)).toBe(git(repo, 'rev-parse', 'main'));
    }
    expect(existsSync(join(dir, '.headless', 'worktrees', 'ws', big.resumeId, 'small.txt'))).toBe(true);
    expect(existsSync(join(dir, '.headless', 'worktrees', 'ws', many.resumeId, 'many', '10001'))).toBe(true);
    await daemon.stop();
  });
});

/** As test/daemon/sandbox.test.ts: the daemon also runs as an unprivileged user made for the test, where the test runs as root. */
const isRoot = process.getuid?.() === 0;

describe.skipIf(!hasBwrap).each(isRoot ? (['root', 'user'] as const) : (['user'] as const))(
  'a sandboxed run in a worktree, the daemon run as %s',
  (variant) => {
    it("sees neither the other workspaces' folders in its worktree nor other Sessions' branches; the service still commits its work", async () => {
      const { dir, repo } = setUp();
      for (const folder of ['app', 'lib']) mkdirSync(join(repo, folder));
      writeFileSync(join(repo, 'app', 'main.txt'), 'app\n');
      writeFileSync(join(repo, 'lib', 'secret.txt'), 'the lib workspace secret\n');
      git(repo, 'add', '.');
      git(repo, 'commit', '--quiet', '-m', 'two workspaces');
      git(repo, 'branch', 'headless/ses_someone_else');
      git(repo, 'pack-refs', '--all');
      const workspace = (id: string, extra: Record<string, unknown> = {}) => ({ id, path: `repo/${id}`, agents: ['fake'], ...extra });
      writeConfig(dir, {
        sandbox: { readable: [FAKE_AGENT] },
        workspaces: [workspace('app', { run: { isolation: 'worktree', sandbox: true } }), workspace('lib')],
      });
      const as: { uid?: number; gid?: number } = variant === 'user' && isRoot ? escapeUser() : {};
      if (as.uid !== undefined) spawnSync('chown', ['-R', `${as.uid}:${as.gid}`, dir]);
      const daemon = await startDaemon(dir, ['--port', '0'], {}, as);
      const probe = [
        '(cat ../lib/secret.txt || echo lib-hidden)',
        "git for-each-ref '--format=%(refname)'",
        '(git log --oneline headless/ses_someone_else || echo other-branch-unknown)',
        'echo work > work.txt',
      ].join(' && ');
      const res = await api(daemon, 'POST', '/api/workspaces/app/headless', { prompt: `sh ${probe}`, timeoutMs: 120_000 });
      expect(res.status, await res.clone().text()).toBe(202);
      const run = (await res.json()) as { taskId: string; resumeId: string };
      const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
      const out = await stdoutOf(daemon, run.taskId);
      expect(out, JSON.stringify(ended)).toContain('lib-hidden');
      expect(out).not.toContain('the lib workspace secret');
      expect(out).toContain(`refs/heads/headless/${run.resumeId}`);
      expect(out).toContain('refs/heads/main');
      expect(out).not.toContain('ses_someone_else\n');
      expect(out).toContain('other-branch-unknown');
      expect(ended.changes).toMatchObject({ committed: true, files: [{ path: 'app/work.txt', status: 'added' }] });
      // The service commits the whole worktree, the hidden folder as it is (the test's git reads a repository another user owns).
      expect(git(repo, '-c', 'safe.directory=*', 'show', `headless/${run.resumeId}:lib/secret.txt`)).toBe('the lib workspace secret');
      await daemon.stop();
    });

    it("runs the setup in the run's sandbox, never as the daemon's user: also a preinstall an agent committed on the ref", async () => {
      const { dir, repo } = setUp();
      const outside = join(dir, 'setup-escaped');
      // As an agent working in the repository's own folder could commit it on main, for `npm ci` to run.
      writeFileSync(join(repo, 'preinstall.sh'), `#!/bin/sh\nid -u > preinstall-uid\ntouch ${outside}\n`, { mode: 0o755 });
      git(repo, 'add', 'preinstall.sh');
      git(repo, 'commit', '--quiet', '-m', 'preinstall');
      const setup = 'id -u > setup-uid && ./preinstall.sh; true';
      writeConfig(dir, {
        sandbox: { readable: [FAKE_AGENT] },
        workspaces: [{ id: 'ws', path: 'repo', agents: ['fake'], run: { isolation: 'worktree', sandbox: true }, worktree: { setup } }],
      });
      const as: { uid?: number; gid?: number } = variant === 'user' && isRoot ? escapeUser() : {};
      if (as.uid !== undefined) spawnSync('chown', ['-R', `${as.uid}:${as.gid}`, dir]);
      const daemon = await startDaemon(dir, ['--port', '0'], {}, as);
      const run = await start(daemon, { prompt: 'sh echo setup=$(cat setup-uid) preinstall=$(cat preinstall-uid)' });
      const ended = (await waitRun(daemon, run.taskId)) as RunRecord;
      const uid = variant === 'root' ? 65532 : (as.uid ?? process.getuid?.());
      expect(await stdoutOf(daemon, run.taskId), JSON.stringify(ended)).toContain(`setup=${uid} preinstall=${uid}`);
      expect(existsSync(outside)).toBe(false);
      // What the setup left is not the run's work.
      expect(ended.changes?.files).toEqual([]);
      await daemon.stop();
    });
  },
);
