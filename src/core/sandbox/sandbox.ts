import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, statSync } from 'node:fs';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { findExecutable } from '../agents/preflight';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { builtFile } from '../util/package-file';
import { type SandboxLayout, bubblewrapArgs } from './bubblewrap';
import { startEgressProxy } from './egress-proxy';

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
  /** `host:port` it may reach besides the service (`HEADLESS_API_URL`); `*`: the host's network. */
  network: string[];
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
  /** The folder every run's private one is made in: hidden from each sandbox, which sees its own bound back. */
  private runs: string | undefined;

  constructor(private readonly o: SandboxOptions) {}

  /** The `bwrap` executable, or a SpawnFailure saying how to get it. */
  executable(): string {
    this.bwrap ??= findExecutable('bwrap', this.o.path ?? process.env.PATH);
    if (!this.bwrap) throw new SpawnFailure('the sandbox needs bubblewrap, which is not installed: apt-get install bubblewrap (or dnf install bubblewrap)');
    return this.bwrap;
  }

  /** Removes the folder the runs' private ones were made in (each is removed when its run ends). */
  close(): void {
    if (this.runs) rmSync(this.runs, { recursive: true, force: true });
    this.runs = undefined;
  }

  /** A spawner that starts the run's agent inside the sandbox; its private temporary folder is removed when it ends. */
  confine(inner: Spawner, run: ConfineInput): Spawner {
    const bwrap = this.executable();
    return async (spawn) => {
      this.runs ??= mkdtempSync(join(tmpdir(), 'hrw-sandboxes-'));
      const tmp = mkdtempSync(join(this.runs, 'run-'));
      const writable = [tmp];
      for (const entry of run.stateDirs) {
        const dir = stateDir(entry, run.env);
        if (dir === undefined) continue;
        // A folder is made so it can be bound (the CLI would make it); a file is bound only if it exists.
        if (!entry.endsWith('.json')) mkdirSync(dir, { recursive: true });
        if (kindOf(dir)) writable.push(dir);
      }
      const workspace = resolve(run.workspace);
      const hidden = [...this.o.hidden, this.runs]
        .map((path) => resolve(path))
        .filter((path) => path !== workspace)
        .flatMap((path) => {
          const kind = kindOf(path);
          return kind ? [{ path, folder: kind === 'folder' }] : [];
        });
      let egress: Egress | undefined;
      try {
        egress = run.network.includes('*') ? undefined : await openEgress(tmp, run.network, spawn.env.HEADLESS_API_URL);
        const inside = egress ? { command: process.execPath, args: [egress.bridge, '--', spawn.command, ...spawn.args] } : spawn;
        const layout = {
          workspace,
          readOnly: run.readOnly,
          writable,
          hidden,
          isolateNetwork: egress !== undefined,
          fresh: FRESH,
          dropCapabilities: process.getuid?.() === 0,
        };
        const args = bubblewrapArgs(layout, run.cwd, inside.command, inside.args);
        const child = await inner({ ...spawn, command: bwrap, args, env: { ...spawn.env, ...egress?.env, TMPDIR: tmp } });
        child.exit.finally(() => closeSandbox(tmp, egress)).catch(() => undefined);
        return child;
      } catch (error) {
        closeSandbox(tmp, egress);
        throw error;
      }
    };
  }
}

/**
 * Where the host keeps the sockets of its services (the system and user buses, Docker, an
 * ssh-agent started by systemd, databases): each sandbox gets an empty folder there instead,
 * with the resolver file bound back where the host's lives in it.
 */
const FRESH = freshFolders(['/run', '/var/run']);

function freshFolders(candidates: string[]): SandboxLayout['fresh'] {
  const folders = candidates.filter((path) => {
    try {
      return lstatSync(path).isDirectory();
    } catch {
      return false;
    }
  });
  let resolver: string | undefined;
  try {
    resolver = realpathSync('/etc/resolv.conf');
  } catch {
    resolver = undefined;
  }
  const files = resolver !== undefined && folders.some((folder) => resolver.startsWith(`${folder}/`)) ? [resolver] : [];
  return { folders, files };
}

interface Egress {
  proxy: Server;
  /** The built bridge program, run inside the sandbox before the agent. */
  bridge: string;
  env: { HEADLESS_SANDBOX_BRIDGE: string };
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/;

/** The egress proxy of a run whose network is limited to `network` and the service; its socket lives in the run's folder. */
async function openEgress(tmp: string, network: string[], apiUrl: string | undefined): Promise<Egress> {
  const bridge = builtFile('sandbox-bridge.js');
  if (!bridge) throw new SpawnFailure('the sandbox network bridge is not built (dist/sandbox-bridge.js): run npm run build');
  const service = apiUrl === undefined ? [] : [new URL(apiUrl)].map((u) => `${u.hostname}:${u.port || (u.protocol === 'https:' ? 443 : 80)}`);
  const allowed = new Set([...network, ...service].map((t) => t.toLowerCase()));
  // Loopback endpoints are served inside at the same address; the rest goes through HTTPS_PROXY.
  const forwards = [...allowed].filter((t) => LOOPBACK.test(t));
  const taken = new Set(forwards.map((t) => Number(t.slice(t.lastIndexOf(':') + 1))));
  let proxyPort = 3128;
  while (taken.has(proxyPort)) proxyPort += 1;
  const socket = join(tmp, 'egress.sock');
  const proxy = await startEgressProxy(socket, allowed);
  return { proxy, bridge, env: { HEADLESS_SANDBOX_BRIDGE: JSON.stringify({ socket, forwards, proxyPort }) } };
}

function closeSandbox(tmp: string, egress: Egress | undefined): void {
  egress?.proxy.close();
  rmSync(tmp, { recursive: true, force: true });
}
