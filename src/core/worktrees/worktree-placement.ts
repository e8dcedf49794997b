/**
 * @module A git worktree per run (docs/worktrees.md), behind the placement seam. A run whose
 * policy names a worktree works in `<root>/<workspace>/<resumeId>` on its Session's branch
 * `headless/<resumeId>`: made from its ref by the Session's first run, continued by each resume.
 * The worktree is locked (git's own lock, naming the run) while a run uses it, so `git worktree
 * prune` never takes it and the start-up sweep knows what a crash left. As the run ends its
 * change is read (`settle`), then its folder is removed or kept as its workspace says (`release`).
 * Every other run is placed by the provider it wraps.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { execa } from 'execa';
import { MARKER_VARIABLE } from '../process/process-tree';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { GIT_REF } from '../../contract/requests';
import type { PlaceInput, Placed, ReleaseInput, RunPlacement, Settled } from '../runs/placement';
import type { Log } from '../logger';
import type { PlacementRecord, Workspace, WorktreeRecord, WorktreeSettings } from '../types';
import { clip } from '../util/text';
import { changedAnything, settleWorktree, untrackedFiles } from './changes';
import { GitError, git, gitLine } from './git';
import { type Listed, listWorktrees, lockReason, runOfLock } from './worktree-list';

const SETUP_TIMEOUT_MS = 600_000;

export interface WorktreePlacementOptions {
  /** Places the runs that do not ask for a worktree; its spawner starts every run. */
  inner: RunPlacement;
  spawner: Spawner;
  /** The folder worktrees are made in, a folder per workspace: never inside a workspace. */
  root: string;
  log: Log;
}

const CLEANUPS = ['if-unchanged', 'always', 'never'];

/** Throws, naming where, on worktree settings that cannot work. */
export function checkWorktreeSettings(ws: Pick<Workspace, 'worktree'>, where: string): void {
  const s = ws.worktree;
  if (s === undefined) return;
  if (s.setup !== undefined && typeof s.setup !== 'string') throw new Error(`${where}: worktree.setup must be a shell command`);
  if (s.setupTimeoutMs !== undefined && !(Number.isInteger(s.setupTimeoutMs) && s.setupTimeoutMs > 0))
    throw new Error(`${where}: worktree.setupTimeoutMs must be a whole number of ms`);
  if (s.cleanup !== undefined && !CLEANUPS.includes(s.cleanup)) throw new Error(`${where}: worktree.cleanup must be ${CLEANUPS.join(', ')}`);
  if (s.ref !== undefined && !(typeof s.ref === 'string' && GIT_REF.test(s.ref)))
    throw new Error(`${where}: worktree.ref must be a git ref (${GIT_REF.source})`);
}

export class WorktreePlacement implements RunPlacement {
  /** One git change at a time per repository: two runs' worktrees are never added or removed at once. */
  private readonly chains = new Map<string, Promise<unknown>>();
  private madeRoot: string | undefined;

  constructor(private readonly o: WorktreePlacementOptions) {}

  /** The root folder, made at first use (its real path: git names worktrees by it). */
  private get root(): string {
    if (this.madeRoot === undefined) {
      mkdirSync(this.o.root, { recursive: true });
      this.madeRoot = realpathSync(this.o.root);
    }
    return this.madeRoot;
  }

  async check(run: Pick<PlaceInput, 'workspace' | 'policy'>): Promise<string | undefined> {
    const ref = run.policy?.worktree?.ref;
    if (ref === undefined) return undefined;
    const repo = await repositoryOf(run.workspace.path);
    if (repo === undefined) return `workspace "${run.workspace.id}" is not in a git repository: isolation "worktree" needs one`;
    const known = await git(['rev-parse', '--verify', '--quiet', '--end-of-options', `${ref}^{commit}`], { cwd: repo }).then(
      () => true,
      () => false,
    );
    return known ? undefined : `ref "${ref}" is not a commit of workspace "${run.workspace.id}"'s repository`;
  }

  async prepare(run: PlaceInput): Promise<Placed> {
    const ref = run.policy?.worktree?.ref;
    if (ref === undefined) return this.o.inner.prepare(run);
    const { workspace, taskId, resumeId } = run;
    const repo = await repositoryOf(workspace.path);
    if (repo === undefined) throw new SpawnFailure(`workspace "${workspace.id}" is not in a git repository: isolation "worktree" needs one`);
    const settings = workspace.worktree ?? {};
    const path = join(this.root, workspace.id, resumeId);
    const branch = `headless/${resumeId}`;
    const { created, added } = await this.inRepo(repo, () => this.checkOut({ repo, path, branch, ref, taskId }));
    let setupFiles: string[] = [];
    try {
      // A resume that finds its Session's worktree works on as it was left.
      if (added) await initSubmodules(path, this.o.log);
      if (added && settings.setup !== undefined) await runSetup(settings, { workspace: workspace.path, worktree: path, taskId });
      setupFiles = await rememberedSetupFiles(path, added && settings.setup !== undefined);
    } catch (error) {
      await this.inRepo(repo, () => removeWorktree({ repo, path, branch, deleteBranch: created }));
      throw error;
    }
    const base = await gitLine(['rev-parse', 'HEAD'], path);
    const worktree: WorktreeRecord = {
      repo,
      path,
      branch,
      base,
      created,
      cleanup: settings.cleanup ?? 'if-unchanged',
      ...(setupFiles.length > 0 ? { setupFiles } : {}),
    };
    const commonDir = await gitLine(['rev-parse', '--path-format=absolute', '--git-common-dir'], path);
    const cwd = join(path, relative(repo, realpathSync(workspace.path)));
    return { cwd, worktree, spawner: this.o.spawner, env: await hooksEnv(repo), view: { root: path, readable: [commonDir] } };
  }

  /** Makes (or finds) the Session's worktree, locked for this run: whether it made the branch, and the folder. */
  private async checkOut(a: { repo: string; path: string; branch: string; ref: string; taskId: string }): Promise<{ created: boolean; added: boolean }> {
    // A worktree whose folder a crash or a person removed still holds its branch: pruned first.
    await git(['worktree', 'prune'], { cwd: a.repo });
    let listed = (await listWorktrees(a.repo)).find((w) => w.path === a.path);
    if (listed?.locked !== undefined) {
      await git(['worktree', 'unlock', a.path], { cwd: a.repo });
      // Removed while the run before was still releasing it: the prune left it for its lock.
      if (!existsSync(a.path)) {
        await git(['worktree', 'prune'], { cwd: a.repo });
        listed = undefined;
      }
    }
    let created = false;
    if (!listed) {
      // A folder git does not know is what a crash left midway: it goes.
      rmSync(a.path, { recursive: true, force: true });
      mkdirSync(join(a.path, '..'), { recursive: true });
      const exists = await git(['rev-parse', '--verify', '--quiet', `refs/heads/${a.branch}`], { cwd: a.repo }).then(
        () => true,
        () => false,
      );
      const from = exists ? [a.path, a.branch] : ['-b', a.branch, a.path, `${a.ref}^{commit}`];
      await git(['worktree', 'add', '--quiet', ...from], { cwd: a.repo });
      created = !exists;
    }
    await git(['worktree', 'lock', '--reason', lockReason(a.taskId), a.path], { cwd: a.repo });
    return { created, added: !listed };
  }

  async settle(run: { taskId: string; placement: PlacementRecord }): Promise<Settled | undefined> {
    const w = run.placement.worktree;
    if (!w || !existsSync(w.path)) return undefined;
    const settled = await this.inRepo(w.repo, () => settleWorktree(w, run.taskId));
    const kept = w.cleanup === 'never' || (w.cleanup === 'if-unchanged' && changedAnything(settled.changes));
    return { ...settled, kept };
  }

  async release(run: ReleaseInput): Promise<void> {
    const w = run.placement.worktree;
    if (!w) return this.o.inner.release(run);
    if (!existsSync(w.path)) return;
    await this.inRepo(w.repo, async () => {
      // Its change unknown (it could not be read): kept, so nothing is lost.
      if (run.changes === undefined || run.changes.worktree !== null) return git(['worktree', 'unlock', w.path], { cwd: w.repo }).catch(() => undefined);
      return removeWorktree({ repo: w.repo, path: w.path, branch: w.branch, deleteBranch: w.created && !changedAnything(run.changes) });
    });
  }

  /**
   * After a restart (recovery has ended what was running): the worktrees still locked by a run
   * that has ended are settled and released as its workspace says, and folders git does not know
   * are removed. A run that crashed before its placement was recorded is found this way.
   */
  async sweep(a: { workspaces: Workspace[]; hasEnded: (taskId: string) => Promise<boolean> }): Promise<void> {
    if (!existsSync(this.o.root)) return;
    for (const workspace of a.workspaces) {
      const folder = join(this.root, workspace.id);
      if (!existsSync(folder)) continue;
      const repo = await repositoryOf(workspace.path);
      if (repo === undefined) continue;
      await git(['worktree', 'prune'], { cwd: repo });
      const listed = (await listWorktrees(repo)).filter((w) => w.path.startsWith(`${folder}/`));
      for (const w of listed) await this.sweepOne(repo, workspace, w, a.hasEnded);
      const known = new Set(listed.map((w) => w.path));
      for (const name of readdirSync(folder)) if (!known.has(join(folder, name))) rmSync(join(folder, name), { recursive: true, force: true });
    }
  }

  private async sweepOne(repo: string, workspace: Workspace, w: Listed, hasEnded: (taskId: string) => Promise<boolean>): Promise<void> {
    const taskId = runOfLock(w.locked);
    if (taskId === undefined || !(await hasEnded(taskId))) return;
    // Its start is not known: what it left uncommitted is its change.
    const record: WorktreeRecord = {
      repo,
      path: w.path,
      branch: w.branch ?? '',
      base: w.head,
      created: false,
      cleanup: workspace.worktree?.cleanup ?? 'if-unchanged',
    };
    const settled = await this.settle({ taskId, placement: { cwd: w.path, worktree: record } }).catch((error: unknown) =>
      this.o.log(`could not read worktree ${w.path}`, error),
    );
    const removed = settled !== undefined && !settled.kept;
    await this.inRepo(repo, async () => {
      if (!removed) return git(['worktree', 'unlock', w.path], { cwd: repo });
      // Its branch goes when another ref holds all of it (a branch a crash left before any work).
      const holders = await gitLine(['for-each-ref', '--contains', w.head, '--format=%(refname)', 'refs/'], repo);
      const elsewhere = holders.split('\n').some((ref) => ref !== '' && ref !== `refs/heads/${record.branch}`);
      return removeWorktree({ repo, path: w.path, branch: record.branch, deleteBranch: elsewhere });
    });
    this.o.log(`the worktree run ${taskId} left was ${removed ? 'removed' : 'kept'} after a restart`);
  }

  /** Runs `work` after every git change already asked of `repo`. */
  private inRepo<T>(repo: string, work: () => Promise<T>): Promise<T> {
    const previous = this.chains.get(repo) ?? Promise.resolve();
    const next = previous.then(work, work);
    const tail = next.catch(() => undefined);
    this.chains.set(repo, tail);
    void tail.then(() => this.chains.get(repo) === tail && this.chains.delete(repo));
    return next;
  }
}

/** The top folder of the git repository holding `path`, or undefined when there is none. */
async function repositoryOf(path: string): Promise<string | undefined> {
  try {
    return realpathSync(await gitLine(['rev-parse', '--show-toplevel'], path));
  } catch (error) {
    if (error instanceof GitError || (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function removeWorktree(a: { repo: string; path: string; branch: string; deleteBranch: boolean }): Promise<void> {
  await git(['worktree', 'remove', '--force', '--force', a.path], { cwd: a.repo });
  if (a.deleteBranch) await git(['branch', '--quiet', '--delete', '--force', a.branch], { cwd: a.repo });
}

/**
 * What the setup left untracked in a worktree: read after it ran, and kept in the worktree's own
 * git folder, so a resume that continues there leaves them out of its commits too.
 */
async function rememberedSetupFiles(path: string, justSetUp: boolean): Promise<string[]> {
  const file = join(await gitLine(['rev-parse', '--path-format=absolute', '--git-dir'], path), 'headless-setup-files.json');
  if (!justSetUp) return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as string[]) : [];
  const files = await untrackedFiles(path);
  writeFileSync(file, JSON.stringify(files));
  return files;
}

/** `git worktree add` never fills submodules: done here, best effort (a submodule that cannot be fetched is logged, not fatal). */
async function initSubmodules(path: string, log: Log): Promise<void> {
  if (!existsSync(join(path, '.gitmodules'))) return;
  await git(['submodule', 'update', '--init', '--recursive', '--quiet'], { cwd: path }).catch((error: unknown) =>
    log(`the submodules of worktree ${path} could not all be checked out`, error),
  );
}

/** The workspace's setup command, in the new worktree; a failure fails the run with its own code. */
async function runSetup(settings: WorktreeSettings, at: { workspace: string; worktree: string; taskId: string }): Promise<void> {
  const timeout = settings.setupTimeoutMs ?? SETUP_TIMEOUT_MS;
  const result = await execa('sh', ['-c', settings.setup ?? ''], {
    cwd: at.worktree,
    // The run's marker: crash recovery kills what a setup left running.
    env: { HEADLESS_WORKSPACE_PATH: at.workspace, HEADLESS_WORKTREE_PATH: at.worktree, [MARKER_VARIABLE]: at.taskId },
    reject: false,
    all: true,
    timeout,
    forceKillAfterDelay: 2000,
    stdin: 'ignore',
  });
  if (result.exitCode === 0) return;
  const why = result.timedOut ? `did not finish within ${timeout} ms` : `exited with ${result.exitCode ?? result.signal}`;
  throw new SpawnFailure(`the worktree's setup command ${why}: ${clip(String(result.all ?? '').trim(), 500)}`, 'worktree_setup_failed');
}

/**
 * A relative `core.hooksPath` (husky's) would be read inside the worktree, where its generated
 * hooks are not: the agent's git is pointed at the repository's own.
 */
async function hooksEnv(repo: string): Promise<Record<string, string>> {
  const hooksPath = await gitLine(['config', '--local', '--get', 'core.hooksPath'], repo).catch(() => '');
  if (hooksPath === '' || isAbsolute(hooksPath) || hooksPath.startsWith('~')) return {};
  return { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: join(repo, hooksPath) };
}
