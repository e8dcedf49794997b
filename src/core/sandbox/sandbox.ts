import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { ownTempFolder } from '../process/own-temp';
import type { Server } from 'node:net';
import { join } from 'node:path';
import { findExecutable } from '../agents/preflight';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { builtFile } from '../util/package-file';
import { agentHomeMounts } from './agent-home';
import { type Mount, type SandboxLayout, type SandboxUser, bubblewrapArgs } from './bubblewrap';
import { startEgressProxy } from './egress-proxy';
import { realPath } from './paths';
import { DEFAULT_SANDBOX_USER, handOver, identityFile, trustOwnRepository } from './sandbox-user';
import { hiddenMounts, installMounts, systemMounts } from './view';

export interface SandboxOptions {
  /** Paths no sandboxed agent may see: the daemon's data directory, config file, token file, socket; other workspaces. */
  hidden: string[];
  /** Paths every sandboxed agent may read besides the system, its PATH and its own install (a toolchain under HOME, say). */
  readable?: string[];
  /** Where each workspace's sandboxed agents keep their state, a folder per workspace. @default a temporary folder, removed at close */
  agentState?: string;
  /** Where `bwrap` is looked up. @default process.env.PATH */
  path?: string;
  /**
   * The host user sandboxed agents run as when the service runs as root (never root itself).
   * Ignored otherwise: agents then run as the service's own user. @default { uid: 65532, gid: 65532 }
   */
  user?: SandboxUser;
}

const isRoot = () => process.getuid?.() === 0;

export interface ConfineInput {
  workspaceId: string;
  /** The folder shown as its workspace (its worktree, for a run in one). */
  workspace: string;
  /** What else it may read (a worktree's repository's git folder: it commits nothing there, the service does). */
  readable: string[];
  /** What it must not see inside its workspace (other workspaces' folders in its worktree). */
  hidden: string[];
  /** Folders shown read-only in another path's place (a per-run view of its repository's git folder). */
  replaced: Array<{ source: string; path: string }>;
  cwd: string;
  readOnly: boolean;
  /** The agent's state (sessions, history), relative to `HOME`: the workspace's own inside the sandbox. */
  state: string[];
  /** The agent's executable configuration and login files, relative to `HOME`: the operator's, read-only. */
  config: string[];
  /** The run's environment: its `HOME`, `PATH` and XDG variables place what it sees; `TMPDIR` is set here. */
  env: Record<string, string>;
  /** `host:port` it may reach besides the service (`HEADLESS_API_URL`); `*`: the host's network. */
  network: string[];
  /** The service made `workspace` for this run's Session (its worktree): under a root service it is handed to the sandbox's user. */
  madeForRun?: boolean;
}

/**
 * Runs agents inside bubblewrap (docs/security.md: Confining agents). Each sees only what is
 * listed: the system read-only, what runs its agent, its workspace, a HOME of its own holding its
 * agent's state for this workspace and the operator's agent configuration read-only, a private
 * /tmp and temporary folder; no other process; no capability, whoever started the daemon.
 */
export class Sandbox {
  private bwrap: string | undefined;
  /** The folder every run's private one is made in: each sandbox sees its own only. */
  private runs: string | undefined;
  /** The agents' state when no folder was given: made at first use, removed at close. */
  private ownState: string | undefined;
  /** Under a root service: `/etc/passwd` and `/etc/group` naming the sandbox user, made at first use. */
  private identityFiles: Array<{ name: 'passwd' | 'group'; file: string }> | undefined;
  /** The host's system as every sandbox sees it: read when a sandbox is first asked for, not at every start. */
  private systemView: Mount[] | undefined;

  constructor(private readonly o: SandboxOptions) {}

  private system(): Mount[] {
    this.systemView ??= systemMounts();
    return this.systemView;
  }

  /** The `bwrap` executable, or a SpawnFailure saying how to get it. */
  executable(): string {
    this.bwrap ??= findExecutable('bwrap', this.o.path ?? process.env.PATH);
    if (!this.bwrap) throw new SpawnFailure('the sandbox needs bubblewrap, which is not installed: apt-get install bubblewrap (or dnf install bubblewrap)');
    return this.bwrap;
  }

  /** Throws, saying why, where bubblewrap is missing or cannot make this sandbox (no user namespaces): never a weaker one. */
  check(): void {
    const bwrap = this.executable();
    const args = bubblewrapArgs(this.layout(this.system(), true), '/', 'true', []);
    const tried = spawnSync(bwrap, args, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    if (tried.status === 0) return;
    const said = (tried.stderr || tried.error?.message || `exit ${tried.status}`).trim();
    throw new SpawnFailure(
      `bubblewrap cannot make a sandbox here (${said}): it needs user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu 24.04, an AppArmor profile that allows bwrap them)`,
    );
  }

  /** Under a root service: who its agents run as, and the programs that switch to that user inside. */
  private layout(mounts: Mount[], isolateNetwork: boolean): SandboxLayout {
    if (!isRoot()) return { mounts, isolateNetwork };
    const setpriv = findExecutable('setpriv', '/usr/bin:/bin:/usr/sbin:/sbin');
    if (!setpriv)
      throw new SpawnFailure("a root service's sandbox needs setpriv (util-linux) to run agents as an unprivileged user: apt-get install util-linux");
    const user = this.user();
    return { mounts, isolateNetwork, drop: { ...user, setpriv, bwrap: this.executable() } };
  }

  private user(): SandboxUser {
    const user = this.o.user ?? DEFAULT_SANDBOX_USER;
    if (user.uid === 0 || user.gid === 0) throw new SpawnFailure('sandbox.user must not be root (uid or gid 0)');
    return user;
  }

  /** Removes the folders the runs' private ones were made in (each is removed when its run ends). */
  close(): void {
    for (const dir of [this.runs, this.ownState]) if (dir) rmSync(dir, { recursive: true, force: true });
    this.runs = undefined;
    this.identityFiles = undefined;
    this.ownState = undefined;
  }

  /** A spawner that starts the run's agent inside the sandbox; its private temporary folder is removed when it ends. */
  confine(inner: Spawner, run: ConfineInput): Spawner {
    const bwrap = this.executable();
    return async (spawn) => {
      const tmp = mkdtempSync(join(this.runsFolder(), 'run-'));
      let egress: Egress | undefined;
      try {
        const user = isRoot() ? this.user() : undefined;
        if (user) await handOver({ run, tmp, user });
        egress = run.network.includes('*') ? undefined : await openEgress(tmp, run.network, spawn.env.HEADLESS_API_URL, user);
        const inside = egress ? { command: process.execPath, args: [egress.bridge, '--', spawn.command, ...spawn.args] } : spawn;
        const mounts = this.view(run, tmp, spawn.command, user);
        const args = bubblewrapArgs(this.layout(mounts, egress !== undefined), run.cwd, inside.command, inside.args);
        const env = { ...spawn.env, ...egress?.env, TMPDIR: tmp, ...(user ? trustOwnRepository(spawn.env) : {}) };
        const child = await inner({ ...spawn, command: bwrap, args, env });
        child.exit.finally(() => closeSandbox(tmp, egress)).catch(() => undefined);
        return child;
      } catch (error) {
        closeSandbox(tmp, egress);
        throw error;
      }
    };
  }

  /** Everything the run sees, from an empty root. */
  private view(run: ConfineInput, tmp: string, command: string, user: SandboxUser | undefined): Mount[] {
    const workspace = realPath(run.workspace);
    const home = run.env.HOME ? realPath(run.env.HOME) : undefined;
    const agentState = this.agentState();
    const hidden = [...this.o.hidden, ...run.hidden, this.runs as string, agentState].filter((path) => realPath(path) !== workspace);
    const mounts: Mount[] = [
      ...this.system(),
      ...installMounts({
        env: run.env,
        command,
        readable: this.o.readable ?? [],
        guarded: [...hidden, ...(home ? [home] : [])],
        shown: [...this.system().flatMap((m) => (m.kind === 'ro' ? [m.path] : [])), workspace],
      }),
      ...(home ? [{ kind: 'tmpfs', path: home, readOnly: false } as const] : []),
      { kind: run.readOnly ? 'ro' : 'rw', source: workspace, path: workspace },
      ...ownGitFolder(workspace),
      ...run.readable.map((path) => ({ kind: 'ro', source: path, path }) as const),
      ...run.replaced.map(({ source, path }) => ({ kind: 'ro', source, path }) as const),
      { kind: 'rw', source: tmp, path: tmp },
      ...agentHomeMounts(agentState, { workspaceId: run.workspaceId, state: run.state, config: run.config, env: run.env, owner: user }),
      ...(user ? this.identity(user) : []),
    ];
    return [...mounts, ...hiddenMounts(hidden, mounts)];
  }

  /**
   * The sandbox user's name in `/etc/passwd` and `/etc/group`, as seen inside: a program that
   * asks who it is (Node's `os.userInfo()`, ssh, git) fails for a uid the host does not list.
   * Written once, root's and read-only, beside the runs' folders.
   */
  private identity(user: SandboxUser): Mount[] {
    if (!this.identityFiles) {
      const folder = mkdtempSync(join(this.runsFolder(), 'identity-'));
      chmodSync(folder, 0o755);
      this.identityFiles = (['passwd', 'group'] as const).map((name) => {
        const file = join(folder, name);
        writeFileSync(file, identityFile(name, user), { mode: 0o644 });
        return { name, file };
      });
    }
    return this.identityFiles.map(({ name, file }) => ({ kind: 'ro', source: file, path: `/etc/${name}` }) as const);
  }

  private runsFolder(): string {
    this.runs ??= ownTempFolder('hrw-sandboxes-');
    return this.runs;
  }

  private agentState(): string {
    if (this.o.agentState) return this.o.agentState;
    this.ownState ??= ownTempFolder('hrw-agent-state-');
    return this.ownState;
  }
}

interface Egress {
  proxy: Server;
  /** The built bridge program, run inside the sandbox before the agent. */
  bridge: string;
  env: { HEADLESS_SANDBOX_BRIDGE: string };
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/;

/** The egress proxy of a run whose network is limited to `network` and the service; its socket lives in the run's folder. */
async function openEgress(tmp: string, network: string[], apiUrl: string | undefined, user: SandboxUser | undefined): Promise<Egress> {
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
  // Under a root service the bridge connects as the sandbox's user; the folder holding the socket is its alone.
  if (user) chownSync(socket, user.uid, user.gid);
  return { proxy, bridge, env: { HEADLESS_SANDBOX_BRIDGE: JSON.stringify({ socket, forwards, proxyPort }) } };
}

function closeSandbox(tmp: string, egress: Egress | undefined): void {
  egress?.proxy.close();
  rmSync(tmp, { recursive: true, force: true });
}

/**
 * The workspace's own `.git` (a folder, or a worktree's file), read-only: config, hooks, refs and
 * attributes there are obeyed by the service's git and by later runs outside any sandbox, so an
 * agent in a sandbox must not write them (docs/security.md: Confining agents). Its work stays in
 * the working tree; a worktree run's is committed by the service.
 */
function ownGitFolder(workspace: string): Mount[] {
  const path = join(workspace, '.git');
  const kind = lstatSync(path, { throwIfNoEntry: false });
  return kind?.isDirectory() || kind?.isFile() ? [{ kind: 'ro', source: path, path }] : [];
}
