/**
 * @module Which local processes hold the other end of a connection the service accepted, read
 * from /proc (Linux): a TCP peer's socket from /proc/net/tcp and tcp6 (its inode), a Unix-socket
 * peer's from `ss` (iproute2: the kernel tells a Unix socket's peer only over sock_diag), then the
 * processes whose /proc/<pid>/fd hold that inode. Only the processes this user may read are seen:
 * a run's are always the service's user's. Undefined: it cannot be told here (no /proc, no `ss`).
 */
import { execFile } from 'node:child_process';
import { readFile, readdir, readlink } from 'node:fs/promises';
import { isIP } from 'node:net';

/** The peer end of a TCP connection, as the accepted socket sees it. */
export interface TcpPeer {
  address: string;
  port: number;
  /** The service's own port on that connection, where known. */
  localPort?: number;
}

/** The pids holding the peer's socket; empty when no local process does (a remote peer); undefined when /proc cannot tell. */
export async function tcpPeerPids(peer: TcpPeer): Promise<number[] | undefined> {
  const address = normalAddress(peer.address);
  if (address === undefined) return [];
  const tables = await Promise.all(['/proc/net/tcp', '/proc/net/tcp6'].map((file) => readFile(file, 'latin1').catch(() => undefined)));
  if (tables.every((t) => t === undefined)) return undefined;
  for (const table of tables) {
    for (const row of (table ?? '').split('\n').slice(1)) {
      const [, local, remote, , , , , , , inode] = row.trim().split(/\s+/);
      if (!local || !remote || !inode || inode === '0') continue;
      if (!sameEndpoint(local, address, peer.port)) continue;
      if (peer.localPort !== undefined && portOf(remote) !== peer.localPort) continue;
      return holders(inode);
    }
  }
  return [];
}

/** The pids holding the peer of the Unix socket at our descriptor `fd`; undefined when it cannot be told. */
export async function unixPeerPids(fd: number): Promise<number[] | undefined> {
  const own = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/self/fd/${fd}`).catch(() => ''))?.[1];
  if (!own) return undefined;
  const listing = await new Promise<string | undefined>((resolve) =>
    execFile('ss', ['-xnH'], { timeout: 5000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout) => resolve(error ? undefined : stdout)),
  );
  if (listing === undefined) return undefined;
  for (const line of listing.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const peer = fields.at(-1);
    // Our socket's line: its inode, then the peer's address and inode, last.
    if (peer && peer !== own && /^\d+$/.test(peer) && fields.slice(0, -1).includes(own)) return holders(peer);
  }
  return undefined;
}

/** Every pid with a descriptor on socket `inode`. */
async function holders(inode: string): Promise<number[]> {
  const target = `socket:[${inode}]`;
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((e) => /^\d+$/.test(e));
  const found: number[] = [];
  await Promise.all(
    pids.map(async (pid) => {
      const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
      for (const fd of fds) {
        if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')) === target) return void found.push(Number(pid));
      }
    }),
  );
  return found;
}

/** An address as compared here: dotted IPv4 (an IPv4-mapped IPv6 one too), or IPv6 as 32 hex digits. */
function normalAddress(address: string): string | undefined {
  const plain = address.replace(/%.*$/, '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (isIP(plain) === 4) return plain;
  if (isIP(plain) !== 6) return undefined;
  const [head = '', tail = ''] = plain.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = plain.includes('::') ? [...groups(head), ...Array<string>(missing).fill('0'), ...groups(tail)] : groups(plain);
  return all
    .map((g) => g.padStart(4, '0'))
    .join('')
    .toLowerCase();
}

/** /proc/net/tcp's `ADDR:PORT` (the address in the kernel's byte order: each 32-bit word little-endian) against ours. */
function sameEndpoint(field: string, address: string, port: number): boolean {
  const [hex = '', portHex = ''] = field.split(':');
  if (Number.parseInt(portHex, 16) !== port) return false;
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse());
  const decoded =
    bytes.length === 4 || (bytes.length === 16 && bytes.slice(0, 10).every((b) => b === '00') && bytes[10] === 'FF' && bytes[11] === 'FF')
      ? bytes
          .slice(-4)
          .map((b) => Number.parseInt(b, 16))
          .join('.')
      : bytes.join('').toLowerCase();
  return decoded === address;
}

const portOf = (field: string): number => Number.parseInt(field.split(':')[1] ?? '', 16);
