/**
 * @module Every key a repository's configuration could set when the service's git runs, whatever
 * its conditions say now (docs/worktrees.md: What the service's git trusts). Git decides an
 * `includeIf` (onbranch, gitdir, hasconfig) when a command runs, and a command can change what
 * holds (`git worktree add` checks out a new branch): so every include is followed, its condition
 * ignored, and every worktree's `config.worktree` read. Each file is read by `git config --file
 * --no-includes` (reading runs nothing); an include that cannot be read is refused, not skipped.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';

/** How deep includes are followed: git's own bound. */
const MAX_DEPTH = 10;
/** `include.path`, `includeIf.<condition>.path` (names are case-insensitive; a condition holds anything but a newline). */
const INCLUDE_KEY = /^include(if\..*)?\.path$/is;

/** Reads one file's `key\nvalue` entries (`git config --file <file> --list --no-includes -z`); throws when it cannot. */
export type ReadConfigFile = (file: string) => Promise<string>;

/** Why the service's git refuses a repository whose configuration it cannot read whole. */
export class UnreadableConfig extends Error {
  constructor(
    readonly file: string,
    why: string,
  ) {
    super(`the repository's configuration includes ${file}, which the service cannot read (${why}): it runs no git on it`);
    this.name = 'UnreadableConfig';
  }
}

/** The configuration files git may read for the git folder `gitDir`: its common folder's, and every worktree's `config.worktree`. */
function baseFiles(gitDir: string): string[] {
  const commonFile = join(gitDir, 'commondir');
  const common = existsSync(commonFile) ? resolve(gitDir, readFileSync(commonFile, 'utf8').trim()) : gitDir;
  const worktrees = join(common, 'worktrees');
  const admins = existsSync(worktrees) ? readdirSync(worktrees).map((id) => join(worktrees, id)) : [];
  const files = [join(common, 'config'), ...[common, gitDir, ...admins].map((dir) => join(dir, 'config.worktree'))];
  return [...new Set(files)].filter((file) => existsSync(file));
}

/** An include's path as git reads it: `~` is the home folder, a relative path is the including file's folder's. */
function includedPath(value: string, from: string): string {
  if (value === '~' || value.startsWith('~/')) {
    const home = process.env.HOME;
    if (home === undefined) throw new UnreadableConfig(value, 'no HOME to expand ~ with');
    return join(home, value.slice(1));
  }
  if (value.startsWith('~')) throw new UnreadableConfig(value, "another user's home folder");
  return isAbsolute(value) ? value : resolve(dirname(from), value);
}

/** The keys `file` sets, and those of every file it includes, followed to `depth`. */
async function keysOf(file: string, read: ReadConfigFile, depth: number, seen: Set<string>): Promise<string[]> {
  if (seen.has(file)) return [];
  if (depth > MAX_DEPTH) throw new UnreadableConfig(file, `includes nested deeper than ${MAX_DEPTH}`);
  seen.add(file);
  let listed: string;
  try {
    listed = await read(file);
  } catch (error) {
    throw new UnreadableConfig(file, error instanceof Error ? (error.message.split('\n')[0] ?? 'unreadable') : 'unreadable');
  }
  const keys: string[] = [];
  for (const entry of listed.split('\0')) {
    if (entry === '') continue;
    const newline = entry.indexOf('\n');
    const key = newline < 0 ? entry : entry.slice(0, newline);
    keys.push(key);
    if (newline >= 0 && INCLUDE_KEY.test(key)) keys.push(...(await keysOf(includedPath(entry.slice(newline + 1), file), read, depth + 1, seen)));
  }
  return keys;
}

/** Every key the configuration of `gitDir` sets, under any condition; throws UnreadableConfig when a file it includes cannot be read. */
export async function everyConfigKey(gitDir: string, read: ReadConfigFile): Promise<string[]> {
  const seen = new Set<string>();
  const keys: string[] = [];
  for (const file of baseFiles(gitDir)) keys.push(...(await keysOf(file, read, 0, seen)));
  return keys;
}
