/**
 * @module What a run changed in its worktree, read as it ends: the work its agent left
 * uncommitted is committed to the run's branch first (by the service, nothing of the repository's
 * configuration obeyed), so every change is on the branch and nothing is lost when the folder is
 * removed; unless it is too large or the worktree is no longer on its branch: then it stays in the
 * kept folder and the record says why. Then the files changed from the commit it started at, and
 * its patch, both bounded.
 */
import type { ChangedFile, RunChanges } from '../../contract/records';
import type { Settled } from '../runs/placement';
import type { WorktreeRecord } from '../types';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type GitPlace, SERVICE_IDENTITY, git, gitLine } from './git';
import { leftoverSize, overCeiling } from './leftovers';
import { worktreePlace } from './places';

/** Files listed on the record at most. */
const FILES_MAX = 1000;
/** Bytes of patch kept; beyond, it is cut and `truncated`. */
export const PATCH_MAX = 1_000_000;

/** The whole worktree but what its setup left. */
const pathspec = (w: WorktreeRecord) => ['--', '.', ...(w.setupFiles ?? []).map((file) => `:(exclude,literal)${file}`)];

/** What the setup command left untracked, as git shows it (an untracked folder as one entry). */
export async function untrackedFiles(at: GitPlace): Promise<string[]> {
  const { stdout } = await git(['status', '--porcelain', '-z', '--ignore-submodules=dirty'], { at });
  return stdout
    .split('\0')
    .filter((entry) => entry.startsWith('?? '))
    .map((entry) => entry.slice(3));
}

/** Why the work the agent left cannot be committed to its branch (its HEAD is not the branch), or undefined. */
function offBranch(at: GitPlace, branch: string): string | undefined {
  const head = readFileSync(join(at.gitDir, 'HEAD'), 'utf8');
  return head === `ref: refs/heads/${branch}\n` ? undefined : `the worktree's HEAD is not its branch ${branch}`;
}

/** Commits what the agent left uncommitted: whether there was something, or why it stays in the folder uncommitted. */
async function commitLeftovers(w: WorktreeRecord, at: GitPlace, taskId: string): Promise<{ committed: boolean; notCommitted?: string }> {
  const message = `headless-run-webhook: work left uncommitted by run ${taskId}`;
  const leftovers = await leftoverSize(at, pathspec(w));
  // Settled again after a crash: the commit it made before is its branch's head, and still its.
  if (leftovers.files === 0) return { committed: (await headSubject(at, w)) === message };
  const refused = overCeiling(leftovers) ?? offBranch(at, w.branch);
  if (refused !== undefined) return { committed: false, notCommitted: refused };
  await git(['add', '--all', ...pathspec(w)], { at });
  await git([...SERVICE_IDENTITY, 'commit', '--no-verify', '--quiet', '-m', message], { at });
  // Checked after the fact too: the commit is on the run's branch, or the record says it is not.
  const after = offBranch(at, w.branch);
  return after === undefined ? { committed: true } : { committed: false, notCommitted: after };
}

/** The subject of its branch's head commit, when that is not its base (the run committed something). */
async function headSubject(at: GitPlace, w: WorktreeRecord): Promise<string | undefined> {
  const head = await gitLine(['rev-parse', '--verify', '--end-of-options', `refs/heads/${w.branch}^{commit}`], at);
  if (head === w.base) return undefined;
  return gitLine(['log', '-1', '--no-show-signature', '--format=%s', '--end-of-options', head], at);
}

const STATUS: Record<string, ChangedFile['status']> = { A: 'added', M: 'modified', D: 'deleted', R: 'renamed', T: 'modified', C: 'added' };

/** `git diff --name-status -z` read into files. */
function filesOf(listing: string): ChangedFile[] {
  const parts = listing.split('\0').filter((p) => p !== '');
  const files: ChangedFile[] = [];
  for (let i = 0; i < parts.length; ) {
    const letter = (parts[i] ?? '').charAt(0);
    const status = STATUS[letter] ?? 'modified';
    if (letter === 'R' || letter === 'C') {
      const [from, path] = [parts[i + 1] ?? '', parts[i + 2] ?? ''];
      files.push(letter === 'R' ? { path, status, from } : { path, status });
      i += 3;
    } else {
      files.push({ path: parts[i + 1] ?? '', status });
      i += 2;
    }
  }
  return files;
}

/** Settles a run's worktree: its leftovers committed (or why not), its change read from its branch. */
export async function settleWorktree(w: WorktreeRecord, taskId: string): Promise<Omit<Settled, 'kept'>> {
  const at = await worktreePlace(w);
  const { committed, notCommitted } = await commitLeftovers(w, at, taskId);
  const head = await gitLine(['rev-parse', '--verify', '--end-of-options', `refs/heads/${w.branch}^{commit}`], at);
  const range = [w.base, head];
  const diff = ['diff', '--no-ext-diff', '--no-textconv', '--ignore-submodules=dirty', '-M'];
  const listing = await git([...diff, '--name-status', '-z', ...range], { at });
  const files = filesOf(listing.stdout);
  const patch = await git([...diff, '--no-color', '--binary', ...range], { at, maxBytes: PATCH_MAX });
  return {
    changes: {
      branch: w.branch,
      base: w.base,
      head,
      committed,
      files: files.slice(0, FILES_MAX),
      ...(files.length > FILES_MAX ? { filesTruncated: true } : {}),
      ...(notCommitted === undefined ? {} : { notCommitted }),
    },
    patch: { text: patch.stdout, truncated: patch.truncated },
  };
}

/** Whether a settled run changed anything. */
export const changedAnything = (c: Pick<RunChanges, 'base' | 'head'>): boolean => c.base !== c.head;
