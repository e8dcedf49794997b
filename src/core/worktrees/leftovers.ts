/**
 * @module The size of what an agent left uncommitted in its worktree, read before the service
 * stages it: past a ceiling (a 1.5 GB file, 60 000 generated files) the service does not commit
 * it, so its git neither runs out of memory nor holds the repository's other runs for long.
 */
import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { type GitPlace, git } from './git';

/** Files the service commits at most in one run's leftovers. */
export const LEFTOVER_FILES_MAX = 10_000;
/** Bytes the service commits at most in one run's leftovers. */
export const LEFTOVER_BYTES_MAX = 100 * 1024 ** 2;
/** Bytes of `git status` read at most: a listing past it is more files than the ceiling. */
const LISTING_MAX = 8 * 1024 ** 2;

export interface Leftovers {
  files: number;
  bytes: number;
  /** The listing was longer than it is read: more files than the ceiling. */
  more: boolean;
}

/** What `git add --all` would stage: its entries counted, the files' sizes as they are on disk. */
export async function leftoverSize(at: GitPlace, pathspec: string[]): Promise<Leftovers> {
  const listing = await git(['status', '--porcelain', '-z', '--untracked-files=all', '--ignore-submodules=dirty', ...pathspec], {
    at,
    maxBytes: LISTING_MAX,
  });
  const parts = listing.stdout.split('\0');
  let files = 0;
  let bytes = 0;
  for (let i = 0; i < parts.length; i++) {
    const entry = parts[i] ?? '';
    if (entry.length < 4) continue;
    files += 1;
    // A rename or copy in the index names its source next.
    if (entry[0] === 'R' || entry[0] === 'C') i += 1;
    const stat = lstatSync(join(at.workTree ?? '', entry.slice(3)), { throwIfNoEntry: false });
    if (stat?.isFile()) bytes += stat.size;
  }
  return { files, bytes, more: listing.truncated };
}

/** Why leftovers this large are not committed, or undefined. */
export function overCeiling(l: Leftovers): string | undefined {
  if (l.more || l.files > LEFTOVER_FILES_MAX)
    return `the work left uncommitted is more than ${LEFTOVER_FILES_MAX} files: not committed, it stays in the kept worktree`;
  if (l.bytes > LEFTOVER_BYTES_MAX)
    return `the work left uncommitted is ${l.bytes} bytes, more than ${LEFTOVER_BYTES_MAX}: not committed, it stays in the kept worktree`;
  return undefined;
}
