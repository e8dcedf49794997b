/**
 * @module The git folders the service's commands name: a repository's common folder, found from
 * the repository, and a worktree's admin folder in it (`<common>/worktrees/<id>`), found there by
 * the worktree's path. Never from the worktree's own `.git`, which its agent may have replaced.
 */
import { existsSync, lstatSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GitError, type GitPlace, discover } from './git';

/** A repository: its top folder and its common git folder (real paths). */
export interface Repository {
  top: string;
  commonDir: string;
}

/** The repository holding `folder`, or undefined when there is none. */
export async function repositoryOf(folder: string): Promise<Repository | undefined> {
  try {
    const found = await discover(folder);
    return { top: realpathSync(found.top), commonDir: realpathSync(found.commonDir) };
  } catch (error) {
    if (error instanceof GitError || (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Where the repository's own commands run (worktrees, branches, refs). */
export const repoPlace = (repo: Repository): GitPlace => ({ gitDir: repo.commonDir, workTree: repo.top });

/** The admin folder of the worktree at `path`, found by the `gitdir` each admin folder names; undefined if none names it. */
export function adminDirOf(commonDir: string, path: string): string | undefined {
  const folder = join(commonDir, 'worktrees');
  if (!existsSync(folder)) return undefined;
  const wanted = join(path, '.git');
  for (const id of readdirSync(folder)) {
    const named = join(folder, id, 'gitdir');
    if (existsSync(named) && readFileSync(named, 'utf8').trim() === wanted) return join(folder, id);
  }
  return undefined;
}

/**
 * The worktree's place for the service's commands. Its `.git` is written back as git made it
 * (whatever the agent put there goes: it is never the run's work), so the folder, if kept, is the
 * worktree it was.
 */
export async function worktreePlace(w: { repo: string; path: string }): Promise<GitPlace> {
  const repo = await repositoryOf(w.repo);
  const admin = repo && adminDirOf(repo.commonDir, w.path);
  if (admin === undefined) throw new GitError(['worktree', w.path], `${w.path} is not a worktree of ${w.repo}`);
  const dotGit = join(w.path, '.git');
  const expected = `gitdir: ${admin}\n`;
  const stat = lstatSync(dotGit, { throwIfNoEntry: false });
  if (!(stat?.isFile() && readFileSync(dotGit, 'utf8') === expected)) {
    rmSync(dotGit, { recursive: true, force: true });
    writeFileSync(dotGit, expected);
  }
  return { gitDir: admin, workTree: w.path };
}
