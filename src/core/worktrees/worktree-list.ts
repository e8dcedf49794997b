/** @module A repository's worktrees as git lists them, and the lock naming the run that uses one. */
import { type GitPlace, git } from './git';

export interface Listed {
  path: string;
  head: string;
  /** Its branch's short name; none when detached. */
  branch?: string;
  /** Its lock's reason ('' for a lock without one); undefined when it is not locked. */
  locked?: string;
}

const LOCK_PREFIX = 'headless-run-webhook: run ';

export const lockReason = (taskId: string): string => `${LOCK_PREFIX}${taskId}`;

/** The run a lock names, if it is one of the service's. */
export function runOfLock(reason: string | undefined): string | undefined {
  return reason?.startsWith(LOCK_PREFIX) ? reason.slice(LOCK_PREFIX.length) : undefined;
}

/** `git worktree list --porcelain -z`, read. */
export async function listWorktrees(at: GitPlace): Promise<Listed[]> {
  const { stdout } = await git(['worktree', 'list', '--porcelain', '-z'], { at });
  const listed: Listed[] = [];
  let current: Listed | undefined;
  for (const line of stdout.split('\0')) {
    if (line === '') {
      if (current) listed.push(current);
      current = undefined;
      continue;
    }
    const [word = '', ...rest] = line.split(' ');
    const value = rest.join(' ');
    if (word === 'worktree') current = { path: value, head: '' };
    else if (current && word === 'HEAD') current.head = value;
    else if (current && word === 'branch') current.branch = value.replace(/^refs\/heads\//, '');
    else if (current && word === 'locked') current.locked = value;
  }
  if (current) listed.push(current);
  return listed;
}
