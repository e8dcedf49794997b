import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { findExecutable } from '../agents/preflight';
import { builtFile } from '../util/package-file';
import type { Mount } from './bubblewrap';
import { insideOf, realPath } from './paths';

/** Where the system keeps programs and libraries, shown read-only. */
const SYSTEM = ['/usr', '/etc', '/opt', '/nix'];
/** Top folders that are a link into /usr on merged-/usr systems (bound as folders elsewhere). */
const SYSTEM_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** In /etc, what is nobody's business inside a sandbox: password hashes, the host's ssh keys, systemd credentials. */
const ETC_SECRETS = ['/etc/shadow', '/etc/shadow-', '/etc/gshadow', '/etc/gshadow-', '/etc/credstore', '/etc/credstore.encrypted'];

const kindOf = (path: string) => lstatSync(path, { throwIfNoEntry: false });

function etcSecrets(): string[] {
  let sshKeys: string[] = [];
  try {
    sshKeys = readdirSync('/etc/ssh')
      .filter((name) => /^ssh_host_.*_key$/.test(name))
      .map((name) => join('/etc/ssh', name));
  } catch {
    sshKeys = [];
  }
  return [...ETC_SECRETS, ...sshKeys].filter((path) => existsSync(path));
}

/**
 * The host's system, the same for every run: programs, libraries and /etc read-only (its secrets
 * hidden); a private /tmp; an empty, read-only /run (where the host keeps its services' sockets:
 * the buses, Docker, databases, ssh-agents) with only the resolver file bound back where it lives.
 */
export function systemMounts(): Mount[] {
  const mounts: Mount[] = [];
  for (const path of SYSTEM) if (kindOf(path)?.isDirectory()) mounts.push({ kind: 'ro', source: path, path });
  for (const path of SYSTEM_LINKS) {
    const kind = kindOf(path);
    if (kind?.isSymbolicLink()) mounts.push({ kind: 'link', target: readlinkSync(path), path });
    else if (kind?.isDirectory()) mounts.push({ kind: 'ro', source: path, path });
  }
  mounts.push({ kind: 'tmpfs', path: '/tmp', readOnly: false }, { kind: 'tmpfs', path: '/run', readOnly: true });
  const resolver = existsSync('/etc/resolv.conf') ? realpathSync('/etc/resolv.conf') : undefined;
  if (resolver && insideOf(resolver, '/run')) mounts.push({ kind: 'ro', source: resolver, path: resolver });
  for (const path of etcSecrets()) mounts.push({ kind: 'hide', path, folder: statSync(path).isDirectory() });
  return mounts;
}

export interface InstallsInput {
  /** The run's `PATH`, `HOME`. */
  env: Record<string, string>;
  /** The command the run starts. */
  command: string;
  /** Paths the operator lets every sandbox read (`sandbox.readable`). */
  readable: string[];
  /** Paths no folder shown may hold: the daemon's own files, other workspaces, HOME, the runs' folders. */
  guarded: string[];
  /** What is already shown (the system, the workspace): nothing inside them is added. */
  shown: string[];
}

/** An npm install is its whole `node_modules`: a package finds its dependencies beside it. */
function installOf(path: string): string {
  const at = path.indexOf('/node_modules/');
  return at < 0 ? path : path.slice(0, at + '/node_modules'.length);
}

/**
 * What runs the agent, read-only: every folder on its PATH (an npm `.bin` folder as its whole
 * `node_modules`), the agent's own executable where it lives, Node's install, this package's
 * inbox command and network bridge, and what the operator adds. A folder that would show HOME,
 * the daemon's files or another run is left out.
 */
export function installMounts(input: InstallsInput): Mount[] {
  const agent = findExecutable(input.command, input.env.PATH);
  const candidates = [
    ...(input.env.PATH ?? '').split(':').filter((dir) => dir.startsWith('/')),
    ...(agent ? [agent] : []),
    dirname(dirname(realPath(process.execPath))),
    ...['inbox-cli.js', 'sandbox-bridge.js'].flatMap((name) => builtFile(name) ?? []),
    ...input.readable,
  ]
    .filter((path) => existsSync(path))
    .map((path) => installOf(realPath(path)));
  const guarded = input.guarded.map(realPath);
  const kept: string[] = [];
  for (const path of candidates) {
    if (path === '/' || guarded.some((g) => insideOf(g, path))) continue;
    if ([...input.shown, ...kept].some((shown) => insideOf(path, shown))) continue;
    for (let i = kept.length - 1; i >= 0; i--) if (insideOf(kept[i] as string, path)) kept.splice(i, 1);
    kept.push(path);
  }
  return kept.map((path) => ({ kind: 'ro', source: path, path }));
}

/** The hidden paths that a mount would show (a folder as an empty one, a file as an empty file). */
export function hiddenMounts(hidden: string[], mounts: Mount[]): Mount[] {
  const shown = mounts.filter((m) => m.kind === 'ro' || m.kind === 'rw').map((m) => m.path);
  return hidden
    .map(realPath)
    .filter((path) => existsSync(path) && !shown.includes(path) && shown.some((s) => insideOf(path, s)))
    .map((path) => ({ kind: 'hide', path, folder: statSync(path).isDirectory() }));
}
