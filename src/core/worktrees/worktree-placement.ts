/**
 * @module A git worktree per run (docs/worktrees.md), behind the placement seam. A run whose
 * policy names a worktree works in `<root>/<workspace>/<resumeId>` on its Session's branch
 * `headless/<resumeId>`: made from its ref by the Session's first run, continued by each resume.
 * The worktree is locked (git's own lock, naming the run) while a run uses it, so `git worktree
 * prune` never takes it and the start-up sweep knows what a crash left. As the run ends its
 * change is read (`settle`), then its folder is removed or kept as its workspace says (`release`).
 * Its runs' processes are this machine's (the local host); its record's `data` is the `WorktreeRecord`.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import { localHost } from '../process/local-host';
import { SpawnFailure } from '../process/spawner';
import type { EndedRun, PlaceInput, Placed, PlacedSetup, PlacementProvider, ReleaseInput, SandboxView, Settled } from '../runs/placement';
import type { Log } from '../logger';
import type { PlacementRecord, Workspace, WorktreeRecord, WorktreeSettings } from '../types';
import { changedAnything, settleWorktree, untrackedFiles } from './changes';
import { type GitPlace, UnsafeRepository, git, gitLine } from './git';
import { type Repository, repoPlace, repositoryOf, worktreePlace } from './places';
import { makeRefView } from './ref-view';
import { type Listed, listWorktrees, lockReason, runOfLock } from './worktree-list';

const SETUP_TIMEOUT_MS = 600_000;
/** Under the root, the per-run views of a repository's git folder that sandboxed runs see (ref-view.ts). */
const VIEWS = '.views';

export interface WorktreePlacementOptions {
  /**
   * The folder worktrees are made in, a folder per workspace: never inside a workspace, and this
   * instance's alone (the start-up sweep removes what it finds there). Without one, a new folder
   * in the temporary folder is made at first use, and the sweep has nothing of its own to look at.
   */
  root?: string;
  /** Every configured workspace: those in a run's repository are hidden from it in a sandbox. */
  workspaces: () => Workspace[];
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
  if ('ref' in s) throw new Error(`${where}: worktree.ref has moved into the run spec: write it as "run": { "ref": … }`);
}

/** A worktree record as a run's placement holds it (`data`): read back from the store, so its shape is checked. */
export function worktreeOf(data: unknown): WorktreeRecord | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const w = data as Partial<WorktreeRecord>;
  return typeof w.repo === 'string' && typeof w.path === 'string' && typeof w.branch === 'string' ? (w as WorktreeRecord) : undefined;
}

export class WorktreePlacement implements PlacementProvider {
  readonly name = 'worktree';
  readonly host = localHost;
  /** One git change at a time per repository: two runs' worktrees are never added or removed at once. */
  private readonly chains = new Map<string, Promise<unknown>>();
  private madeRoot: string | undefined;

  constructor(private readonly o: WorktreePlacementOptions) {}

  /** The root folder, made at first use (its real path: git names worktrees by it). */
  private get root(): string {
    if (this.madeRoot === undefined) {
      const root = this.o.root ?? mkdtempSync(join(tmpdir(), 'hrw-worktrees-'));
      mkdirSync(root, { recursive: true });
      this.madeRoot = realpathSync(root);
    }
    return this.madeRoot;
  }

  async check(run: Pick<PlaceInput, 'workspace' | 'policy'>): Promise<string | undefined> {
    const ref = run.policy?.worktree?.ref ?? 'HEAD';
    const repo = await repositoryOf(run.workspace.path);
    if (repo === undefined) return `workspace "${run.workspace.id}" is not in a git repository: isolation "worktree" needs one`;
    const unknown = `ref "${ref}" is not a commit of workspace "${run.workspace.id}"'s repository`;
    return git(['rev-parse', '--verify', '--quiet', '--end-of-options', `${ref}^{commit}`], { at: repoPlace(repo) }).then(
      () => undefined,
      (error: unknown) => (error instanceof UnsafeRepository ? `workspace "${run.workspace.id}"'s repository: ${error.message}` : unknown),
    );
  }

  async prepare(run: PlaceInput): Promise<Placed> {
    const ref = run.policy?.worktree?.ref ?? 'HEAD';
    const { workspace, taskId, resumeId } = run;
    const repo = await repositoryOf(workspace.path);
    if (repo === undefined) throw new SpawnFailure(`workspace "${workspace.id}" is not in a git repository: isolation "worktree" needs one`);
    const settings = workspace.worktree ?? {};
    const path = join(this.root, workspace.id, resumeId);
    const branch = `headless/${resumeId}`;
    const { created } = await this.inRepo(repo.top, () => this.checkOut({ repo, path, branch, ref, taskId }));
    const at = await worktreePlace({ repo: repo.top, path });
    const undo = async () => {
      rmSync(join(this.root, VIEWS, taskId), { recursive: true, force: true });
      await this.inRepo(repo.top, () => removeWorktree({ repo, path, branch, deleteBranch: created }));
    };
    let setupFiles: string[] = [];
    let fresh = false;
    try {
      // Set up only what the operator chose: a worktree fresh from its ref, never a Session's branch (what agents wrote).
      fresh = created && !(await namesSessionBranch(repo, ref));
      if (fresh) await initSubmodules(at, this.o.log);
      setupFiles = await rememberedSetupFiles(at, false);
    } catch (error) {
      await undo();
      throw error;
    }
    const base = await gitLine(['rev-parse', '--verify', `refs/heads/${branch}^{commit}`], at);
    const worktree: WorktreeRecord = {
      repo: repo.top,
      path,
      branch,
      base,
      created,
      cleanup: settings.cleanup ?? 'if-unchanged',
      ...(setupFiles.length > 0 ? { setupFiles } : {}),
    };
    const cwd = join(path, relative(repo.top, realpathSync(workspace.path)));
    const view = run.policy?.sandbox ? await this.sandboxView({ repo, at, branch, taskId, workspace }) : undefined;
    // Run by the launcher as the agent runs (confined alike): the ref's content may be an agent's.
    const setup = fresh && settings.setup !== undefined ? setupOf({ command: settings.setup, settings, workspace, worktree, at, undo }) : undefined;
    const env = await hooksEnv(repo);
    return { cwd, data: worktree, spawner: run.spawner, env, madeForRun: true, ...(view ? { view } : {}), ...(setup ? { setup } : {}) };
  }

  /** What a sandboxed run sees: its worktree but the other workspaces' folders, and its own view of the repository's refs. */
  private async sandboxView(a: { repo: Repository; at: GitPlace; branch: string; taskId: string; workspace: Workspace }): Promise<SandboxView> {
    const root = a.at.workTree ?? '';
    const refs = await makeRefView({ repo: a.repo, admin: a.at.gitDir, branch: a.branch, folder: join(this.root, VIEWS, a.taskId) });
    const hidden = siblingFolders(a.repo.top, root, a.workspace, this.o.workspaces());
    return { root, readable: refs?.readable ?? [a.repo.commonDir], hidden, replaced: refs?.replaced ?? [] };
  }

  /** Makes (or finds) the Session's worktree, locked for this run: whether it made the branch. */
  private async checkOut(a: { repo: Repository; path: string; branch: string; ref: string; taskId: string }): Promise<{ created: boolean }> {
    // A worktree whose folder a crash or a person removed still holds its branch: pruned first.
    const at = repoPlace(a.repo);
    await git(['worktree', 'prune'], { at });
    let listed = (await listWorktrees(at)).find((w) => w.path === a.path);
    if (listed?.locked !== undefined) {
      await git(['worktree', 'unlock', a.path], { at });
      // Removed while the run before was still releasing it: the prune left it for its lock.
      if (!existsSync(a.path)) {
        await git(['worktree', 'prune'], { at });
        listed = undefined;
      }
    }
    let created = false;
    if (!listed) {
      // A folder git does not know is what a crash left midway: it goes.
      rmSync(a.path, { recursive: true, force: true });
      mkdirSync(join(a.path, '..'), { recursive: true });
      const exists = await git(['rev-parse', '--verify', '--quiet', `refs/heads/${a.branch}`], { at }).then(
        () => true,
        () => false,
      );
      const from = exists ? [a.path, a.branch] : ['-b', a.branch, a.path, `${a.ref}^{commit}`];
      // Its checkout (a git of its own) has the same configuration overrides: no filter, no hook runs.
      await git(['worktree', 'add', '--quiet', ...from], { at });
      created = !exists;
    }
    await git(['worktree', 'lock', '--reason', lockReason(a.taskId), a.path], { at });
    return { created };
  }

  async settle(run: { taskId: string; placement: PlacementRecord }): Promise<Settled | undefined> {
    const w = worktreeOf(run.placement.data);
    if (!w || !existsSync(w.path)) return undefined;
    const settled = await this.inRepo(w.repo, () => settleWorktree(w, run.taskId));
    // Work that could not be committed is only in the folder: it stays.
    const kept = settled.changes.notCommitted !== undefined || w.cleanup === 'never' || (w.cleanup === 'if-unchanged' && changedAnything(settled.changes));
    return { ...settled, ...(kept ? { kept: w.path } : {}) };
  }

  async release(run: ReleaseInput): Promise<void> {
    const w = worktreeOf(run.placement.data);
    if (!w) return;
    rmSync(join(this.root, VIEWS, run.taskId), { recursive: true, force: true });
    if (!existsSync(w.path)) return;
    const repo = await repositoryOf(w.repo);
    if (repo === undefined) return;
    await this.inRepo(w.repo, async () => {
      // Its change unknown (it could not be read): kept, so nothing is lost.
      if (run.changes === undefined || run.changes.worktree !== null)
        return git(['worktree', 'unlock', w.path], { at: repoPlace(repo) }).catch(() => undefined);
      return removeWorktree({ repo, path: w.path, branch: w.branch, deleteBranch: w.created && !changedAnything(run.changes) });
    });
  }

  /**
   * After a restart (recovery has ended what was running): the worktrees still locked by a run
   * that has ended are settled and released as its workspace says, and folders git does not know
   * are removed, with the sandbox views of runs that have ended. A run that crashed before its
   * placement was recorded is found this way.
   */
  async sweep(a: { workspaces: Workspace[]; ended: (taskId: string) => Promise<EndedRun | undefined> }): Promise<void> {
    if (this.o.root === undefined || !existsSync(this.o.root)) return;
    const views = join(this.root, VIEWS);
    if (existsSync(views)) for (const taskId of readdirSync(views)) if (await a.ended(taskId)) rmSync(join(views, taskId), { recursive: true, force: true });
    for (const workspace of a.workspaces) {
      const folder = join(this.root, workspace.id);
      if (!existsSync(folder)) continue;
      const repo = await repositoryOf(workspace.path);
      if (repo === undefined) continue;
      await git(['worktree', 'prune'], { at: repoPlace(repo) });
      const listed = (await listWorktrees(repoPlace(repo))).filter((w) => w.path.startsWith(`${folder}/`));
      for (const w of listed) await this.sweepOne(repo, workspace, w, a.ended);
      const known = new Set(listed.map((w) => w.path));
      for (const name of readdirSync(folder)) if (!known.has(join(folder, name))) rmSync(join(folder, name), { recursive: true, force: true });
    }
  }

  private async sweepOne(repo: Repository, workspace: Workspace, w: Listed, ended: (taskId: string) => Promise<EndedRun | undefined>): Promise<void> {
    const taskId = runOfLock(w.locked);
    const run = taskId === undefined ? undefined : await ended(taskId);
    if (taskId === undefined || run === undefined) return;
    // Its end was recorded with what it changed (a crash came before its release): released as that record says, a kept folder kept.
    if (run.changes !== undefined && (run.changes.worktree === w.path || run.changes.worktree === null)) {
      const data: WorktreeRecord = { repo: repo.top, path: w.path, branch: w.branch ?? '', base: run.changes.base, created: false, cleanup: 'never' };
      await this.release({ taskId, workspaceId: workspace.id, placement: { provider: this.name, cwd: w.path, data }, changes: run.changes });
      this.o.log(`the worktree run ${taskId} left was ${run.changes.worktree === null ? 'removed' : 'kept'} after a restart, as its record says`);
      return;
    }
    // Its start is not known: what it left uncommitted is its change.
    const record: WorktreeRecord = {
      repo: repo.top,
      path: w.path,
      branch: w.branch ?? '',
      base: w.head,
      created: false,
      cleanup: workspace.worktree?.cleanup ?? 'if-unchanged',
    };
    const settled = await this.settle({ taskId, placement: { provider: this.name, cwd: w.path, data: record } }).catch((error: unknown) =>
      this.o.log(`could not read worktree ${w.path}`, error),
    );
    const removed = settled !== undefined && settled.kept === undefined;
    const at = repoPlace(repo);
    await this.inRepo(repo.top, async () => {
      if (!removed) return git(['worktree', 'unlock', w.path], { at });
      // Its branch goes when another ref holds all of it (a branch a crash left before any work).
      const holders = await gitLine(['for-each-ref', '--contains', w.head, '--format=%(refname)', 'refs/'], at);
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

/** Whether `ref` names a Session's branch: what agents wrote, not what the operator chose. */
async function namesSessionBranch(repo: Repository, ref: string): Promise<boolean> {
  // `ref` is a ref, never an option (GIT_REF): `--end-of-options` would be printed here.
  const full = await gitLine(['rev-parse', '--symbolic-full-name', ref], repoPlace(repo)).catch(() => '');
  return full.startsWith('refs/heads/headless/');
}

/**
 * The folders of the other configured workspaces inside the run's repository, as they are in
 * its worktree: hidden from it in a sandbox. One holding the run's own workspace cannot be.
 */
function siblingFolders(top: string, worktree: string, own: Workspace, all: Workspace[]): string[] {
  const inside = (path: string, folder: string) => {
    const rel = relative(folder, path);
    return rel === '' || !(rel.startsWith('..') || isAbsolute(rel));
  };
  const ownPath = realpathSync(own.path);
  return all.flatMap((ws) => {
    if (ws.id === own.id || !existsSync(ws.path)) return [];
    const real = realpathSync(ws.path);
    return inside(real, top) && !inside(ownPath, real) ? [join(worktree, relative(top, real))] : [];
  });
}

async function removeWorktree(a: { repo: Repository; path: string; branch: string; deleteBranch: boolean }): Promise<void> {
  await git(['worktree', 'remove', '--force', '--force', a.path], { at: repoPlace(a.repo) });
  if (a.deleteBranch) await git(['branch', '--quiet', '--delete', '--force', a.branch], { at: repoPlace(a.repo) });
}

/**
 * What the setup left untracked in a worktree: read after it ran, and kept in the worktree's own
 * git folder, so a resume that continues there leaves them out of its commits too.
 */
async function rememberedSetupFiles(at: GitPlace, justSetUp: boolean): Promise<string[]> {
  const file = join(at.gitDir, 'headless-setup-files.json');
  if (!justSetUp) return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as string[]) : [];
  const files = await untrackedFiles(at);
  writeFileSync(file, JSON.stringify(files));
  return files;
}

/** `git worktree add` never fills submodules: done here, best effort (a submodule that cannot be fetched is logged, not fatal). */
async function initSubmodules(at: GitPlace, log: Log): Promise<void> {
  if (!existsSync(join(at.workTree ?? '', '.gitmodules'))) return;
  await git(['submodule', 'update', '--init', '--recursive', '--quiet'], { at }).catch((error: unknown) =>
    log(`the submodules of worktree ${at.workTree} could not all be checked out`, error),
  );
}

/**
 * The workspace's setup command, in the new worktree (placement.ts `PlacedSetup`): what it leaves
 * untracked is remembered once it succeeded; a failure fails the run with its own code and removes the worktree.
 */
function setupOf(a: {
  command: string;
  settings: WorktreeSettings;
  workspace: Workspace;
  worktree: WorktreeRecord;
  at: GitPlace;
  undo: () => Promise<void>;
}): PlacedSetup {
  return {
    command: a.command,
    cwd: a.worktree.path,
    env: { HEADLESS_WORKSPACE_PATH: a.workspace.path, HEADLESS_WORKTREE_PATH: a.worktree.path },
    timeoutMs: a.settings.setupTimeoutMs ?? SETUP_TIMEOUT_MS,
    what: "the worktree's setup command",
    failureCode: 'worktree_setup_failed',
    succeeded: async () => {
      const setupFiles = await rememberedSetupFiles(a.at, true);
      return { ...a.worktree, ...(setupFiles.length > 0 ? { setupFiles } : {}) };
    },
    failed: a.undo,
  };
}

/**
 * A relative `core.hooksPath` (husky's) would be read inside the worktree, where its generated
 * hooks are not: the agent's git is pointed at the repository's own.
 */
async function hooksEnv(repo: Repository): Promise<Record<string, string>> {
  const hooksPath = await gitLine(['config', '--local', '--get', 'core.hooksPath'], repoPlace(repo)).catch(() => '');
  if (hooksPath === '' || isAbsolute(hooksPath) || hooksPath.startsWith('~')) return {};
  return { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: join(repo.top, hooksPath) };
}
