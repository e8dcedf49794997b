/**
 * @module What a run changed in its worktree, read as it ends: the work its agent left
 * uncommitted is committed to the run's branch first (by the service, hooks off), so every
 * change is on the branch and nothing is lost when the folder is removed; then the files changed
 * from the commit it started at, and its patch, both bounded.
 */
import type { ChangedFile, RunChanges } from '../../contract/records';
import type { Settled } from '../runs/placement';
import type { WorktreeRecord } from '../types';
import { SERVICE_IDENTITY, git, gitLine } from './git';

/** Files listed on the record at most. */
const FILES_MAX = 1000;
/** Bytes of patch kept; beyond, it is cut and `truncated`. */
export const PATCH_MAX = 1_000_000;

/** The whole worktree but what its setup left. */
const pathspec = (w: WorktreeRecord) => ['--', '.', ...(w.setupFiles ?? []).map((file) => `:(exclude,literal)${file}`)];

/** What the setup command left untracked, as git shows it (an untracked folder as one entry). */
export async function untrackedFiles(path: string): Promise<string[]> {
  const { stdout } = await git(['status', '--porcelain', '-z'], { cwd: path });
  return stdout
    .split('\0')
    .filter((entry) => entry.startsWith('?? '))
    .map((entry) => entry.slice(3));
}

/** Commits what the agent left uncommitted; true if there was something. */
async function commitLeftovers(w: WorktreeRecord, taskId: string): Promise<boolean> {
  const status = await gitLine(['status', '--porcelain', '--untracked-files=all', ...pathspec(w)], w.path);
  if (status === '') return false;
  await git(['add', '--all', ...pathspec(w)], { cwd: w.path });
  const message = `headless-run-webhook: work left uncommitted by run ${taskId}`;
  await git([...SERVICE_IDENTITY, '-c', 'commit.gpgsign=false', 'commit', '--no-verify', '--quiet', '-m', message], { cwd: w.path });
  return true;
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

/** Settles a run's worktree: its leftovers committed, its change read. */
export async function settleWorktree(w: WorktreeRecord, taskId: string): Promise<Omit<Settled, 'kept'>> {
  const committed = await commitLeftovers(w, taskId);
  const head = await gitLine(['rev-parse', 'HEAD'], w.path);
  const range = [w.base, head];
  const listing = await git(['diff', '--no-ext-diff', '--no-textconv', '--name-status', '-M', '-z', ...range], { cwd: w.path });
  const files = filesOf(listing.stdout);
  const patch = await git(['diff', '--no-ext-diff', '--no-textconv', '--no-color', '-M', '--binary', ...range], { cwd: w.path, maxBytes: PATCH_MAX });
  return {
    changes: {
      branch: w.branch,
      base: w.base,
      head,
      committed,
      files: files.slice(0, FILES_MAX),
      ...(files.length > FILES_MAX ? { filesTruncated: true } : {}),
    },
    patch: { text: patch.stdout, truncated: patch.truncated },
  };
}

/** Whether a settled run changed anything. */
export const changedAnything = (c: Pick<RunChanges, 'base' | 'head'>): boolean => c.base !== c.head;
