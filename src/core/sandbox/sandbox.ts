import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { findExecutable } from '../agents/preflight';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { bubblewrapArgs } from './bubblewrap';

export interface SandboxOptions {
  /** Paths no sandboxed agent may see: the daemon's data directory, config file, token file, socket; other workspaces. */
  hidden: string[];
  /** Where `bwrap` is looked up. @default process.env.PATH */
  path?: string;
}

export interface ConfineInput {
  workspace: string;
  cwd: string;
  readOnly: boolean;
  /** The agent's state folders, relative to `HOME` (XDG variables and `CODEX_HOME` honoured). */
  stateDirs: string[];
  /** The run's environment: its `HOME` and XDG variables place the state folders; `TMPDIR` is set here. */
  env: Record<string, string>;
}

/** Where the XDG variables move a folder that defaults under HOME. */
const XDG: Array<[string, string]> = [
  ['.config/', 'XDG_CONFIG_HOME'],
  ['.local/share/', 'XDG_DATA_HOME'],
  ['.local/state/', 'XDG_STATE_HOME'],
  ['.cache/', 'XDG_CACHE_HOME'],
];

function stateDir(entry: string, env: Record<string, string>): string | undefined {
  if (entry === '.codex' && env.CODEX_HOME) return env.CODEX_HOME;
  for (const [prefix, variable] of XDG) if (entry.startsWith(prefix) && env[variable]) return join(env[variable], entry.slice(prefix.length));
  return env.HOME ? join(env.HOME, entry) : undefined;
}

const kindOf = (path: string): 'folder' | 'file' | undefined => {
  try {
    return statSync(path).isDirectory() ? 'folder' : 'file';
  } catch {
    return undefined;
  }
};

/**
 * Runs agents inside bubblewrap (docs/security.md: Confining agents): each sees its workspace,
 * its CLI's own state and a private temporary folder read-write, the rest of the file system
 * read-only, none of the hidden paths, and no other process.
 */
export class Sandbox {
  private bwrap: string | undefined;

  constructor(private readonly o: SandboxOptions) {}

  /** The `bwrap` executable, or a SpawnFailure saying how to get it. */
  executable(): string {
    this.bwrap ??= findExecutable('bwrap', this.o.path ?? process.env.PATH);
    if (!this.bwrap) throw new SpawnFailure('the sandbox needs bubblewrap, which is not installed: apt-get install bubblewrap (or dnf install bubblewrap)');
    return this.bwrap;
  }

  /** A spawner that starts the run's agent inside the sandbox; its private temporary folder is removed when it ends. */
  confine(inner: Spawner, run: ConfineInput): Spawner {
    const bwrap = this.executable();
    return async (spawn) => {
      const tmp = mkdtempSync(join(tmpdir(), 'hrw-sandbox-'));
      const writable = [tmp];
      for (const entry of run.stateDirs) {
        const dir = stateDir(entry, run.env);
        if (dir === undefined) continue;
        // A folder is made so it can be bound (the CLI would make it); a file is bound only if it exists.
        if (!entry.endsWith('.json')) mkdirSync(dir, { recursive: true });
        if (kindOf(dir)) writable.push(dir);
      }
      const workspace = resolve(run.workspace);
      const hidden = this.o.hidden
        .map((path) => resolve(path))
        .filter((path) => path !== workspace)
        .flatMap((path) => {
          const kind = kindOf(path);
          return kind ? [{ path, folder: kind === 'folder' }] : [];
        });
      const args = bubblewrapArgs({ workspace, readOnly: run.readOnly, writable, hidden }, run.cwd, spawn.command, spawn.args);
      try {
        const child = await inner({ ...spawn, command: bwrap, args, env: { ...spawn.env, TMPDIR: tmp } });
        child.exit.finally(() => rmSync(tmp, { recursive: true, force: true })).catch(() => undefined);
        return child;
      } catch (error) {
        rmSync(tmp, { recursive: true, force: true });
        throw error;
      }
    };
  }
}
