/**
 * @module The descriptors the daemon was started holding (a shell's redirection, a parent's open
 * file): Node opens its own close-on-exec, but inherited ones pass on to every child, agents
 * and sandboxes included, where `/proc/self/fd/N` would read a file no mount shows. They are
 * closed before anything else is opened (docs/security.md: What runs get).
 */
import { closeSync, readFileSync, readdirSync } from 'node:fs';

/** `O_CLOEXEC` in `/proc/<pid>/fdinfo`'s octal flags. */
const CLOSE_ON_EXEC = 0o2000000;

/** Closes every descriptor above 2 that a child would inherit, but Node's IPC channel; answers the ones closed. */
export function closeInheritedDescriptors(): number[] {
  let listed: string[];
  try {
    listed = readdirSync('/proc/self/fd');
  } catch {
    return [];
  }
  const ipc = Number(process.env.NODE_CHANNEL_FD ?? -1);
  const closed: number[] = [];
  for (const fd of listed.map(Number)) {
    if (!(fd > 2) || fd === ipc) continue;
    const flags = /^flags:\s*([0-7]+)$/m.exec(readInfo(fd))?.[1];
    if (flags === undefined || (Number.parseInt(flags, 8) & CLOSE_ON_EXEC) !== 0) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // Already gone (the listing's own descriptor).
    }
  }
  return closed;
}

function readInfo(fd: number): string {
  try {
    return readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
  } catch {
    return '';
  }
}
