/**
 * @module Git as the service runs it on a workspace's repository: never a hook of the repository
 * (its `post-checkout` or `pre-commit` is the agent's business, not the service's), never a
 * prompt, the caller's `GIT_*` variables left out, and Git LFS files left as pointers, so a
 * checkout works whether or not `git-lfs` is installed (docs/worktrees.md: Pitfalls).
 */
import { execa } from 'execa';
import { findExecutable } from '../agents/preflight';

/** How long one git command may take (a checkout of a large tree included). */
const GIT_TIMEOUT_MS = 300_000;

/** The identity of the commits the service makes of an agent's uncommitted work. */
export const SERVICE_IDENTITY = ['-c', 'user.name=headless-run-webhook', '-c', 'user.email=headless-run-webhook@localhost'];

const NO_LFS = ['-c', 'filter.lfs.process=', '-c', 'filter.lfs.smudge=', '-c', 'filter.lfs.clean=', '-c', 'filter.lfs.required=false'];

export class GitError extends Error {
  constructor(
    readonly args: string[],
    readonly stderr: string,
  ) {
    super(`git ${args.join(' ')}: ${stderr.trim().split('\n').slice(-3).join(' ') || 'failed'}`);
    this.name = 'GitError';
  }
}

export interface GitOptions {
  cwd: string;
  /** Bytes of stdout kept; beyond, `truncated` is set. @default unbounded */
  maxBytes?: number;
  env?: Record<string, string>;
}

/** The environment git runs in: the service's, without the caller's `GIT_*` (a `GIT_DIR` would point elsewhere). */
function gitEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && (!name.startsWith('GIT_') || name.startsWith('GIT_CONFIG_'))) env[name] = value;
  return { ...env, GIT_TERMINAL_PROMPT: '0', GIT_LFS_SKIP_SMUDGE: '1', ...extra };
}

let lfs: boolean | undefined;
/** Without `git-lfs`, its filters are switched off for the service's commands: a repository that names them still checks out. */
function lfsArgs(): string[] {
  lfs ??= findExecutable('git-lfs', process.env.PATH) !== undefined;
  return lfs ? [] : NO_LFS;
}

/** Runs git; throws a GitError with its stderr when it fails. */
export async function git(args: string[], o: GitOptions): Promise<{ stdout: string; truncated: boolean }> {
  // A worktree a root service handed to its sandbox's user is that user's: git would refuse it as of dubious ownership.
  const full = ['-c', 'core.hooksPath=/dev/null', '-c', `safe.directory=${o.cwd}`, ...lfsArgs(), ...args];
  const result = await execa('git', full, {
    cwd: o.cwd,
    env: gitEnv(o.env),
    extendEnv: false,
    reject: false,
    stripFinalNewline: false,
    timeout: GIT_TIMEOUT_MS,
    ...(o.maxBytes === undefined ? {} : { maxBuffer: { stdout: o.maxBytes } }),
  });
  const truncated = result.isMaxBuffer === true;
  if (result.exitCode !== 0 && !truncated) throw new GitError(args, typeof result.stderr === 'string' ? result.stderr : '');
  return { stdout: typeof result.stdout === 'string' ? result.stdout : '', truncated };
}

/** The trimmed output of a git command that answers one line. */
export async function gitLine(args: string[], cwd: string): Promise<string> {
  return (await git(args, { cwd })).stdout.trim();
}
