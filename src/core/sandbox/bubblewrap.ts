import { existsSync } from 'node:fs';

/** One piece of what a sandboxed run sees (docs/security.md: Confining agents); `path` is where, inside. */
export type Mount =
  /** A host path shown read-only (`ro`) or read-write (`rw`) at `path`. */
  | { kind: 'ro' | 'rw'; source: string; path: string }
  /** A fresh empty folder of its own; `readOnly` once everything inside it is mounted. */
  | { kind: 'tmpfs'; path: string; readOnly: boolean }
  | { kind: 'link'; target: string; path: string }
  /** A folder made on the way to a mount, readable by the sandbox's user; `open`: writable too (inside its HOME). */
  | { kind: 'dir'; path: string; open: boolean }
  /** A path it must not see: a folder becomes an empty read-only one, a file an empty one. */
  | { kind: 'hide'; path: string; folder: boolean };

export interface SandboxLayout {
  /** Everything it sees, from an empty root: nothing is there that is not listed. */
  mounts: Mount[];
  /** A network namespace of its own (only its loopback), where its traffic goes through the egress proxy. */
  isolateNetwork: boolean;
  /**
   * Under a root daemon: the host user the agent runs as (never uid 0), and the programs that
   * switch to it inside (`setpriv`, then `bwrap` again for the user namespace). Absent: the
   * daemon's own user, in a user namespace of its own.
   */
  drop?: SandboxUser & { setpriv: string; bwrap: string };
}

/** A host uid and gid. */
export interface SandboxUser {
  uid: number;
  gid: number;
}

const depth = (path: string) => path.split('/').filter(Boolean).length;

/**
 * Made as root, the folders bubblewrap adds on the way to a mount are root's alone (0700), and
 * the sandbox's user could not reach what is mounted in them: they are made explicitly, open to
 * read (0755), or to write inside a writable empty folder (HOME: an agent still writes `~/.config/x`
 * beside its state in `~/.config/y`). Folders inside a host folder shown are the host's, left as they are.
 */
function madeFolders(mounts: Mount[]): Mount[] {
  const own = new Set(mounts.map((m) => m.path));
  const hostFolders = mounts.filter((m) => m.kind === 'ro' || m.kind === 'rw').map((m) => m.path);
  const writable = mounts.filter((m) => m.kind === 'tmpfs' && !m.readOnly).map((m) => m.path);
  const folders = new Map<string, Mount>();
  for (const mount of mounts) {
    const parts = mount.path.split('/').filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const path = `/${parts.slice(0, i).join('/')}`;
      if (own.has(path) || hostFolders.some((h) => path.startsWith(`${h}/`))) continue;
      folders.set(path, { kind: 'dir', path, open: writable.some((w) => path.startsWith(`${w}/`)) });
    }
  }
  return [...folders.values()];
}

/** A writable empty folder is root's when root makes the view: open to the sandbox's user (it alone is inside), sticky like /tmp. */
function mountArgs(mount: Mount, asRoot: boolean): string[] {
  switch (mount.kind) {
    case 'ro':
      return ['--ro-bind', mount.source, mount.path];
    case 'rw':
      return ['--bind', mount.source, mount.path];
    case 'tmpfs':
      return asRoot && !mount.readOnly ? ['--perms', '1777', '--tmpfs', mount.path] : ['--tmpfs', mount.path];
    case 'link':
      return ['--symlink', mount.target, mount.path];
    case 'dir':
      return ['--perms', mount.open ? '1777' : '0755', '--dir', mount.path];
    case 'hide':
      return mount.folder ? ['--tmpfs', mount.path] : ['--ro-bind', '/dev/null', mount.path];
  }
}

/**
 * The kernel's writable knobs in /proc, made read-only: sysctls (`kernel.core_pattern` runs a
 * program as host root), the SysRq trigger, IRQ affinities, bus settings. A path the host lacks is skipped.
 */
const PROC_KNOBS = ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus', '/proc/fs'];

const procKnobs = (exists: (path: string) => boolean) => PROC_KNOBS.filter(exists).flatMap((path) => ['--ro-bind', path, path]);

/**
 * bubblewrap's arguments. The mounts go in order of depth, so a folder is in place before what
 * is mounted inside it (a hidden parent before the workspace bound into it, the workspace before
 * a hidden folder inside it); the empty folders and the root are made read-only last, once their
 * mount points exist. A user namespace of its own with every capability dropped, whoever starts
 * it (root included), no new user namespaces inside, and a pid namespace with a fresh /proc, so
 * no other process is seen. The process stays in the run's process group, so cancel and the
 * watchdog reach it.
 *
 * Under a root daemon the agent must not be host root (it would own root's files and /proc's
 * knobs, capabilities or not): this outer bubblewrap sets the view up as root, with no user
 * namespace, keeping only the right to change uid; `setpriv` then becomes the sandbox's user
 * for good (no capability left, bounding set empty), and an inner bubblewrap, started as that
 * user, gives it a user namespace of its own with no new ones inside and /proc's knobs read-only.
 */
export function bubblewrapArgs(layout: SandboxLayout, cwd: string, command: string, args: string[], exists = existsSync): string[] {
  const mounts = layout.drop ? [...layout.mounts, ...madeFolders(layout.mounts)] : layout.mounts;
  const ordered = mounts.map((mount, index) => ({ mount, index })).sort((a, b) => depth(a.mount.path) - depth(b.mount.path) || a.index - b.index);
  const readOnly = layout.mounts.filter((m) => (m.kind === 'tmpfs' && m.readOnly) || (m.kind === 'hide' && m.folder)).map((m) => m.path);
  const view = [
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    ...ordered.flatMap(({ mount }) => mountArgs(mount, layout.drop !== undefined)),
    ...[...readOnly, '/'].flatMap((path) => ['--remount-ro', path]),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(layout.isolateNetwork ? ['--unshare-net'] : []),
    '--die-with-parent',
  ];
  const userns = ['--unshare-user', '--disable-userns', ...procKnobs(exists), '--cap-drop', 'ALL', '--die-with-parent', '--chdir', cwd, '--', command, ...args];
  const drop = layout.drop;
  if (!drop) return [...view, ...userns];
  const { uid, gid } = drop;
  const setpriv = [drop.setpriv, `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--'];
  const inner = [drop.bwrap, '--bind', '/', '/', '--dev-bind', '/dev', '/dev', ...userns];
  return [...view, '--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--chdir', cwd, '--', ...setpriv, ...inner];
}
