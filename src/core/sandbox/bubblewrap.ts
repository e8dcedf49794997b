/** What a sandboxed run sees of the file system (docs/security.md: Confining agents). */
export interface SandboxLayout {
  /** The run's working directory: read-write, or read-only under `permissions: "read-only"`. */
  workspace: string;
  readOnly: boolean;
  /** Folders it may write besides: its CLI's own state, its private temporary folder. */
  writable: string[];
  /** Paths it must not see at all: folders become empty, files empty. Only paths that exist. */
  hidden: Array<{ path: string; folder: boolean }>;
  /** A network namespace of its own (only its loopback), where its traffic goes through the egress proxy. */
  isolateNetwork: boolean;
  /** Folders replaced by an empty one of its own (`/run`: the host's service sockets), and files bound back into them (a resolver file that lives there). */
  fresh: { folders: string[]; files: string[] };
  /** Started by root: every capability is dropped, so it cannot unmount, remount or reach around what it is shown. */
  dropCapabilities: boolean;
}

const inside = (path: string, folder: string) => path === folder || path.startsWith(folder.endsWith('/') ? folder : `${folder}/`);

/**
 * bubblewrap's arguments: the whole file system read-only, a fresh /dev and /proc in a pid
 * namespace of its own (so no other process's /proc, the daemon's environment included), fresh
 * empty folders where the host keeps its service sockets, the hidden paths covered, then the
 * writable ones bound over, then any hidden path inside those covered again; every capability
 * dropped when root starts it. The process stays in the run's process group, so cancel and the
 * watchdog reach it.
 */
export function bubblewrapArgs(layout: SandboxLayout, cwd: string, command: string, args: string[]): string[] {
  // A hidden folder becomes an empty one, made read-only once everything is mounted (a bind into
  // it needs its mount point made first): nothing written there could land anywhere.
  const hide = (h: SandboxLayout['hidden'][number]) => (h.folder ? ['--tmpfs', h.path] : ['--ro-bind', '/dev/null', h.path]);
  const binds = [layout.workspace, ...layout.writable];
  const hiddenInside = layout.hidden.filter((h) => binds.some((b) => inside(h.path, b) && h.path !== b));
  const emptied = [...layout.fresh.folders, ...[...layout.hidden, ...hiddenInside].filter((h) => h.folder).map((h) => h.path)];
  return [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    ...layout.fresh.folders.flatMap((folder) => ['--tmpfs', folder]),
    ...layout.fresh.files.flatMap((file) => ['--ro-bind', file, file]),
    ...layout.hidden.flatMap(hide),
    ...(layout.readOnly ? ['--ro-bind', layout.workspace, layout.workspace] : ['--bind', layout.workspace, layout.workspace]),
    ...layout.writable.flatMap((path) => ['--bind', path, path]),
    ...hiddenInside.flatMap(hide),
    ...emptied.flatMap((folder) => ['--remount-ro', folder]),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(layout.isolateNetwork ? ['--unshare-net'] : []),
    ...(layout.dropCapabilities ? ['--cap-drop', 'ALL'] : []),
    '--die-with-parent',
    '--chdir',
    cwd,
    '--',
    command,
    ...args,
  ];
}
