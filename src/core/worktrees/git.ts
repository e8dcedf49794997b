/**
 * @module Git as the service runs it on a workspace's repository, whose worktrees an agent
 * writes (docs/worktrees.md: What the service's git trusts). Every command names its git folder
 * and work tree (`--git-dir`, `--work-tree`): a `.git` the agent planted is never read. No
 * configuration can make it run a program: the user's and the system's are not read, and every
 * key of the repository's own (every include followed, whatever its condition: config-files.ts) that names a command (fsmonitor, hooks,
 * filters, diff and merge drivers, pagers, editors, ssh, credential helpers, signing programs) is
 * overridden, after it is listed, on each command. Each command is bounded in time and, where
 * `prlimit` exists, in memory. Never a prompt; the caller's `GIT_*` variables are left out; Git LFS
 * files stay pointers, so a checkout works whether or not `git-lfs` is installed.
 */
import { execa } from 'execa';
import { findExecutable } from '../agents/preflight';
import { UnreadableConfig, everyConfigKey } from './config-files';
import { commandKeyOverrides } from './git-config-guard';

/** How long one git command may take (a checkout of a large tree included). */
const GIT_TIMEOUT_MS = 300_000;
/** The address space one git command may take: packs are mapped in small windows to fit. */
const GIT_MEMORY_BYTES = 2 * 1024 ** 3;

/** The identity of the commits the service makes of an agent's uncommitted work. */
export const SERVICE_IDENTITY = ['-c', 'user.name=headless-run-webhook', '-c', 'user.email=headless-run-webhook@localhost'];

/** Where a command works: a git folder, and the work tree it is about (none for the repository's own bookkeeping). */
export interface GitPlace {
  gitDir: string;
  workTree?: string;
}

export class GitError extends Error {
  constructor(
    readonly args: string[],
    readonly stderr: string,
  ) {
    super(`git ${args.join(' ')}: ${stderr.trim().split('\n').slice(-3).join(' ') || 'failed'}`);
    this.name = 'GitError';
  }
}

/** A repository whose configuration the service cannot read whole: no git runs on it (config-files.ts). */
export class UnsafeRepository extends GitError {
  constructor(args: string[], why: string) {
    super(args, why);
    this.message = why;
    this.name = 'UnsafeRepository';
  }
}

export interface GitOptions {
  at: GitPlace;
  /** Bytes of stdout kept; beyond, `truncated` is set. @default unbounded */
  maxBytes?: number;
  /** The service's own settings for this one command, set last (a push's credential): in its environment only, never in a file. */
  config?: Array<[string, string]>;
}

/** Set on every command: what runs programs whatever the repository says, and what bounds memory. */
const FIXED: Array<[string, string]> = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.untrackedCache', 'false'],
  ['core.packedGitLimit', '256m'],
  ['core.packedGitWindowSize', '32m'],
  ['diff.ignoreSubmodules', 'dirty'],
  ['submodule.recurse', 'false'],
  ['commit.gpgSign', 'false'],
  ['tag.gpgSign', 'false'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
];

/** The environment git runs in: the service's, without the caller's `GIT_*`, the user's and the system's configuration off. */
function gitEnv(overrides: Array<[string, string]>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('GIT_')) env[name] = value;
  const config: Record<string, string> = { GIT_CONFIG_COUNT: String(overrides.length) };
  overrides.forEach(([key, value], i) => {
    config[`GIT_CONFIG_KEY_${i}`] = key;
    config[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return {
    ...env,
    ...config,
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_LFS_SKIP_SMUDGE: '1',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_PAGER: 'cat',
    GIT_EDITOR: 'true',
    GIT_ASKPASS: 'true',
    SSH_ASKPASS: 'true',
  };
}

/**
 * What the operator's own environment sets as command-line configuration (`GIT_CONFIG_COUNT`,
 * say `protocol.file.allow` for local submodules): kept, before the service's overrides.
 */
function operatorConfig(): Array<[string, string]> {
  const count = Number(process.env.GIT_CONFIG_COUNT ?? '0');
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i < (Number.isInteger(count) ? count : 0); i++) {
    const key = process.env[`GIT_CONFIG_KEY_${i}`];
    if (key !== undefined) pairs.push([key, process.env[`GIT_CONFIG_VALUE_${i}`] ?? '']);
  }
  return pairs;
}

let memoryLimit: string[] | undefined;
/** `prlimit --as` where it exists (util-linux); else git runs with the service's own limits (docs/worktrees.md). */
function bounded(): string[] {
  if (memoryLimit === undefined) {
    const prlimit = findExecutable('prlimit', process.env.PATH);
    memoryLimit = prlimit === undefined ? [] : [prlimit, `--as=${GIT_MEMORY_BYTES}`, '--'];
  }
  return memoryLimit;
}

let lfs: boolean | undefined;
const hasLfs = (): boolean => {
  lfs ??= findExecutable('git-lfs', process.env.PATH) !== undefined;
  return lfs;
};

/** Runs git, without reading any configuration first: the listing of the repository's keys. */
async function rawGit(args: string[], o: GitOptions, overrides: Array<[string, string]>): Promise<{ stdout: string; truncated: boolean }> {
  const place = ['--git-dir', o.at.gitDir, ...(o.at.workTree === undefined ? [] : ['--work-tree', o.at.workTree])];
  const [command = 'git', ...prefix] = [...bounded(), 'git'];
  const result = await execa(command, [...prefix, '--no-pager', ...place, ...args], {
    cwd: o.at.workTree ?? o.at.gitDir,
    env: gitEnv([...operatorConfig(), ...FIXED, ...overrides]),
    extendEnv: false,
    reject: false,
    stripFinalNewline: false,
    timeout: GIT_TIMEOUT_MS,
    stdin: 'ignore',
    ...(o.maxBytes === undefined ? {} : { maxBuffer: { stdout: o.maxBytes } }),
  });
  const truncated = result.isMaxBuffer === true;
  if (result.exitCode !== 0 && !truncated) throw new GitError(args, typeof result.stderr === 'string' ? result.stderr : String(result.message));
  return { stdout: typeof result.stdout === 'string' ? result.stdout : '', truncated };
}

/** Runs git; throws a GitError with its stderr when it fails, or when the repository's configuration cannot all be read. */
export async function git(args: string[], o: GitOptions): Promise<{ stdout: string; truncated: boolean }> {
  // Read now, for this command: every key the repository's configuration could set as it runs, whatever its conditions.
  const read = async (file: string) => (await rawGit(['config', '--file', file, '--list', '--no-includes', '-z'], { at: { gitDir: o.at.gitDir } }, [])).stdout;
  const keys = await everyConfigKey(o.at.gitDir, read).catch((error: unknown) => {
    throw error instanceof UnreadableConfig ? new UnsafeRepository(args, error.message) : error;
  });
  return rawGit(args, o, [...commandKeyOverrides(keys, hasLfs()), ...(o.config ?? [])]);
}

/** The trimmed output of a git command that answers one line. */
export async function gitLine(args: string[], at: GitPlace): Promise<string> {
  return (await git(args, { at })).stdout.trim();
}

/**
 * The repository holding `folder`, found the way git finds it (the one command run from a
 * folder rather than on a named git folder): its top folder and its common git folder.
 */
export async function discover(folder: string): Promise<{ top: string; commonDir: string }> {
  const args = ['rev-parse', '--path-format=absolute', '--show-toplevel', '--git-common-dir'];
  const [command = 'git', ...prefix] = [...bounded(), 'git'];
  const result = await execa(command, [...prefix, ...(await safeDirectories()), ...args], {
    cwd: folder,
    env: gitEnv([...FIXED]),
    extendEnv: false,
    reject: false,
    timeout: GIT_TIMEOUT_MS,
    stdin: 'ignore',
  });
  const [top, commonDir] = String(result.stdout).split('\n');
  if (result.exitCode !== 0 || !top || !commonDir) throw new GitError(args, String(result.stderr || result.message));
  return { top, commonDir };
}

let safe: Promise<string[]> | undefined;
/** The operator's `safe.directory` (user and system configuration, read once): a repository another user owns still works. */
function safeDirectories(): Promise<string[]> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('GIT_')) env[name] = value;
  safe ??= execa('git', ['config', '--get-all', 'safe.directory'], { cwd: '/', env, extendEnv: false, reject: false, stdin: 'ignore' }).then((read) =>
    String(read.stdout)
      .split('\n')
      .filter((line) => line !== '')
      .flatMap((dir) => ['-c', `safe.directory=${dir}`]),
  );
  return safe;
}
