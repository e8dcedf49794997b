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
}

const inside = (path: string, folder: string) => path === folder || path.startsWith(folder.endsWith('/') ? folder : `${folder}/`);

/**
 * bubblewrap's arguments: the whole file system read-only, a fresh /dev and /proc in a pid
 * namespace of its own (so no other process's /proc, the daemon's environment included), the
 * hidden paths covered, then the writable ones bound over, then any hidden path inside those
 * covered again. The process stays in the run's process group, so cancel and the watchdog reach it.
 */
export function bubblewrapArgs(layout: SandboxLayout, cwd: string, command: string, args: string[]): string[] {
  // A folder becomes an empty read-only one: nothing written there could land anywhere.
  const hide = (h: SandboxLayout['hidden'][number]) => (h.folder ? ['--tmpfs', h.path, '--remount-ro', h.path] : ['--ro-bind', '/dev/null', h.path]);
  const binds = [layout.workspace, ...layout.writable];
  return [
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    ...layout.hidden.flatMap(hide),
    ...(layout.readOnly ? ['--ro-bind', layout.workspace, layout.workspace] : ['--bind', layout.workspace, layout.workspace]),
    ...layout.writable.flatMap((path) => ['--bind', path, path]),
    ...layout.hidden.filter((h) => binds.some((b) => inside(h.path, b) && h.path !== b)).flatMap(hide),
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(layout.isolateNetwork ? ['--unshare-net'] : []),
    '--die-with-parent',
    '--chdir',
    cwd,
    '--',
    command,
    ...args,
  ];
}
