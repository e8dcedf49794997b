import { processAlive } from '../core/process/alive';

// Built-ins by getBuiltinModule: an ESM import reads every export of one, loading what they load,
// which a caller command pays at each start (docs/performance.md: the caller CLI).
const { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, renameSync, rmSync, writeFileSync } = process.getBuiltinModule('node:fs');
const { homedir } = process.getBuiltinModule('node:os');
const { basename, dirname, join, resolve } = process.getBuiltinModule('node:path');

/**
 * Where the daemon keeps its SQLite store (docs/configuration.md: Data directory): outside any
 * workspace, so an agent's `git add -A` never commits it. `--data-dir`, else `HEADLESS_DATA_DIR`,
 * else a folder of the project's own under the platform's state folder. One daemon at a time per
 * folder: a second one is refused.
 */

const NAME = 'headless-run-webhook';
const STORE = 'headless.sqlite';
const LOCK = 'daemon.json';

export interface DataDirInput {
  flag: string | undefined;
  env: NodeJS.ProcessEnv;
  cwd: string;
  platform?: NodeJS.Platform;
}

export interface DataDir {
  path: string;
  /** True when neither the flag nor the variable chose it. */
  isDefault: boolean;
}

export function chooseDataDir({ flag, env, cwd, platform = process.platform }: DataDirInput): DataDir {
  const chosen = flag ?? (env.HEADLESS_DATA_DIR || undefined);
  if (chosen !== undefined) return { path: resolve(cwd, chosen), isDefault: false };
  return { path: projectFolder(stateHome(env, platform), realPathOf(cwd)), isDefault: true };
}

/**
 * The default folder of the project the daemon is started in: one per project folder (its name
 * and a hash of its path), so two projects' "default" workspaces never share a store.
 */
function projectFolder(state: string, project: string): string {
  const name =
    basename(project)
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .slice(0, 40) || 'root';
  // Node's own crypto object: an ESM import of node:crypto reads every export, lazy ones included,
  // a seventh of a caller command's CPU (the caller finds its daemon here).
  const { hash } = process.getBuiltinModule('node:crypto');
  return join(state, NAME, 'projects', `${name}-${hash('sha256', project, 'hex').slice(0, 12)}`);
}

const realPathOf = (path: string) => {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
};

function stateHome(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): string {
  if (platform === 'darwin') return join(env.HOME || homedir(), 'Library', 'Application Support');
  if (platform === 'win32') return env.LOCALAPPDATA || join(homedir(), 'AppData', 'Local');
  return env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state');
}

/**
 * Moves the store of versions before 0.2 (`./.headless`, inside the workspace) to the default
 * folder, once; where that folder already holds a store it is left alone. Returns what to log.
 */
function migrateOldStore(dir: DataDir, cwd: string): string | undefined {
  const old = join(cwd, '.headless');
  if (!dir.isDefault || !existsSync(join(old, STORE))) return undefined;
  if (existsSync(join(dir.path, STORE))) {
    return `an older store at ${old} was left as it is: ${dir.path} already holds one (start with --data-dir ${old} to use it)`;
  }
  mkdirSync(dir.path, { recursive: true, mode: 0o700 });
  for (const name of readdirSync(old)) if (name.startsWith(STORE)) move(join(old, name), join(dir.path, name));
  if (readdirSync(old).length === 0) rmSync(old, { recursive: true });
  return `moved the store from ${old} to ${dir.path} (out of the workspace)`;
}

function move(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    copyFileSync(from, to);
    rmSync(from);
  }
}

/** What the folder's daemon wrote of itself: local callers find its URL here (the port may have been bumped). */
interface DaemonFile {
  pid: number;
  url?: string;
}

function readDaemonFile(path: string): DaemonFile | undefined {
  try {
    const file = JSON.parse(readFileSync(join(path, LOCK), 'utf8')) as DaemonFile;
    return Number.isInteger(file.pid) ? file : undefined;
  } catch {
    return undefined;
  }
}

export interface DataDirClaim {
  /** Writes the URL it listens on, once bound. */
  listening(url: string): void;
  release(): void;
}

/**
 * Marks the folder as this daemon's. A folder whose daemon is still alive is refused: two
 * daemons on one SQLite store would each take the other's runs for interrupted ones.
 */
function claimDataDir(path: string): DataDirClaim | { refused: string } {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  const holder = readDaemonFile(path)?.pid;
  if (holder && holder !== process.pid && processAlive(holder)) {
    return { refused: `${path} is the data directory of the daemon with pid ${holder}: stop it, or give this one --data-dir` };
  }
  const write = (file: DaemonFile) => writeFileSync(join(path, LOCK), `${JSON.stringify(file)}\n`, { mode: 0o600 });
  write({ pid: process.pid });
  return {
    listening: (url) => write({ pid: process.pid, url }),
    release() {
      if (readDaemonFile(path)?.pid === process.pid) rmSync(join(path, LOCK), { force: true });
    },
  };
}

/**
 * Where a local caller (the caller CLI, the MCP bridge) finds the service: `HEADLESS_URL`, else
 * the daemon running on the default (or `HEADLESS_DATA_DIR`) folder, else the default port.
 */
export function callerUrl(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  if (env.HEADLESS_URL) return env.HEADLESS_URL;
  if (env.HEADLESS_DATA_DIR) return liveUrl(resolve(cwd, env.HEADLESS_DATA_DIR)) ?? DEFAULT_URL;
  // The daemon of this project folder, or of the nearest folder above it that has one.
  const state = stateHome(env, process.platform);
  for (let dir = realPathOf(cwd); ; dir = dirname(dir)) {
    const url = liveUrl(projectFolder(state, dir));
    if (url) return url;
    if (dirname(dir) === dir) return DEFAULT_URL;
  }
}

const DEFAULT_URL = 'http://127.0.0.1:47331';

/** The URL the daemon of `folder` listens on, while it runs. */
function liveUrl(folder: string): string | undefined {
  const file = readDaemonFile(folder);
  return file?.url && processAlive(file.pid) ? file.url : undefined;
}

/** The daemon's data directory, chosen, migrated and claimed; a move is said with `say`. */
export function openDataDir(input: DataDirInput, say: (line: string) => void): DataDirClaim & { path: string } {
  const dir = chooseDataDir(input);
  const moved = migrateOldStore(dir, input.cwd);
  if (moved) say(moved);
  const claim = claimDataDir(dir.path);
  if ('refused' in claim) throw new Error(claim.refused);
  return { path: dir.path, ...claim };
}
