/**
 * @module What a sandboxed run in a worktree sees of its repository's git folder
 * (docs/worktrees.md: In a sandbox): a folder of its own shown in the git folder's place, holding
 * the repository's refs but other Sessions' branches (`headless/*`), its HEAD and configuration,
 * with the repository's objects, `info`, submodules and LFS files and its own worktree's admin
 * folder bound in, read-only. Other worktrees' admin folders and every reflog are not there.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { SandboxView } from '../runs/placement';
import { git } from './git';
import { type Repository, repoPlace } from './places';

export type RefView = Pick<SandboxView, 'readable' | 'replaced'>;

const SESSION_BRANCHES = 'refs/heads/headless/';
/** The folders of the git folder shown as they are: what `git log`, `git status` and `git diff` read. */
const SHOWN = ['objects', 'info', 'modules', 'lfs'];

/**
 * Makes the view in `folder`, for the run on `branch` whose admin folder is `admin`; undefined
 * for a repository whose refs are not files (reftable), which is shown whole (docs/worktrees.md).
 */
export async function makeRefView(a: { repo: Repository; admin: string; branch: string; folder: string }): Promise<RefView | undefined> {
  const common = a.repo.commonDir;
  if (existsSync(join(common, 'reftable'))) return undefined;
  rmSync(a.folder, { recursive: true, force: true });
  for (const dir of ['refs/heads', 'refs/tags', relative(common, a.admin), ...SHOWN]) mkdirSync(join(a.folder, dir), { recursive: true });
  for (const file of ['HEAD', 'config', 'shallow']) if (existsSync(join(common, file))) copyFileSync(join(common, file), join(a.folder, file));
  const { stdout } = await git(['for-each-ref', '--format=%(objectname) %(refname)'], { at: repoPlace(a.repo) });
  const own = `refs/heads/${a.branch}`;
  const refs = stdout.split('\n').filter((line) => {
    const ref = line.slice(line.indexOf(' ') + 1);
    return line !== '' && (!ref.startsWith(SESSION_BRANCHES) || ref === own);
  });
  writeFileSync(join(a.folder, 'packed-refs'), [...refs, ''].join('\n'));
  const readable = [a.admin, ...SHOWN.map((dir) => join(common, dir)).filter((path) => existsSync(path))];
  return { readable, replaced: [{ source: a.folder, path: common }] };
}
