/** One piece of what a sandboxed run sees (docs/security.md: Confining agents); `path` is where, inside. */
export type Mount =
  /** A host path shown read-only (`ro`) or read-write (`rw`) at `path`. */
  | { kind: 'ro' | 'rw'; source: string; path: string }
  /** A fresh empty folder of its own; `readOnly` once everything inside it is mounted. */
  | { kind: 'tmpfs'; path: string; readOnly: boolean }
  | { kind: 'link'; target: string; path: string }
  /** A path it must not see: a folder becomes an empty read-only one, a file an empty one. */
  | { kind: 'hide'; path: string; folder: boolean };

export interface SandboxLayout {
  /** Everything it sees, from an empty root: nothing is there that is not listed. */
  mounts: Mount[];
  /** A network namespace of its own (only its loopback), where its traffic goes through the egress proxy. */
  isolateNetwork: boolean;
}

const depth = (path: string) => path.split('/').filter(Boolean).length;

function mountArgs(mount: Mount): string[] {
  switch (mount.kind) {
    case 'ro':
      return ['--ro-bind', mount.source, mount.path];
    case 'rw':
      return ['--bind', mount.source, mount.path];
    case 'tmpfs':
      return ['--tmpfs', mount.path];
    case 'link':
      return ['--symlink', mount.target, mount.path];
    case 'hide':
      return mount.folder ? ['--tmpfs', mount.path] : ['--ro-bind', '/dev/null', mount.path];
  }
}

/**
 * bubblewrap's arguments. The mounts go in order of depth, so a folder is in place before what
 * is mounted inside it (a hidden parent before the workspace bound into it, the workspace before
 * a hidden folder inside it); the empty folders and the root are made read-only last, once their
 * mount points exist. A user namespace of its own with every capability dropped, whoever starts
 * it (root included), no new user namespaces inside, and a pid namespace with a fresh /proc, so
 * no other process is seen. The process stays in the run's process group, so cancel and the
 * watchdog reach it.
 */
export function bubblewrapArgs(layout: SandboxLayout, cwd: string, command: string, args: string[]): string[] {
  const ordered = layout.mounts.map((mount, index) => ({ mount, index })).sort((a, b) => depth(a.mount.path) - depth(b.mount.path) || a.index - b.index);
  const readOnly = layout.mounts.filter((m) => (m.kind === 'tmpfs' && m.readOnly) || (m.kind === 'hide' && m.folder)).map((m) => m.path);
  return [
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    ...ordered.flatMap(({ mount }) => mountArgs(mount)),
    ...[...readOnly, '/'].flatMap((path) => ['--remount-ro', path]),
    '--unshare-user',
    '--disable-userns',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(layout.isolateNetwork ? ['--unshare-net'] : []),
    '--cap-drop',
    'ALL',
    '--die-with-parent',
    '--chdir',
    cwd,
    '--',
    command,
    ...args,
  ];
}
