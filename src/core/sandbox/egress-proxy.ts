import { type Server, type Socket, connect, createServer } from 'node:net';

/** The most a client may send before its CONNECT line is complete. */
const MAX_HEAD = 8192;

/**
 * A sandboxed run's only way out (docs/security.md: Confining agents): an HTTP CONNECT proxy on a
 * Unix socket bound into the sandbox, which opens a tunnel only to an allowed `host:port` and
 * answers `403` to anything else.
 */
export function startEgressProxy(socketPath: string, allowed: ReadonlySet<string>): Promise<Server> {
  const server = createServer((client) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEAD) refuse(client, '431 Request Header Fields Too Large');
        return;
      }
      client.off('data', onData);
      const target = /^CONNECT ([^\s]+) HTTP\/1\.[01](\r\n|$)/.exec(head.subarray(0, end).toString('latin1'))?.[1];
      if (!target) return refuse(client, '405 Method Not Allowed');
      if (!allowed.has(target.toLowerCase())) return refuse(client, '403 Forbidden');
      tunnel(client, target, head.subarray(end + 4));
    };
    client.on('data', onData);
    client.on('error', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve(server));
  });
}

function refuse(client: Socket, status: string): void {
  client.end(`HTTP/1.1 ${status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
}

function tunnel(client: Socket, target: string, rest: Buffer): void {
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon).replace(/^\[|\]$/g, '');
  const upstream = connect(Number(target.slice(colon + 1)), host, () => {
    noteForwarded(upstream);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (rest.length > 0) upstream.write(rest);
    client.pipe(upstream).pipe(client);
  });
  upstream.on('error', () => (upstream.connecting ? refuse(client, '502 Bad Gateway') : client.destroy()));
  client.on('close', () => upstream.destroy());
}

/** The local ends (`address port`) of the tunnels open now: a connection to the service from one of them is a sandboxed run's. */
const forwarded = new Set<string>();

/** Keeps the tunnel's local end while it is open, so the service can tell it was forwarded for a run (docs/approvals.md). */
function noteForwarded(upstream: Socket): void {
  const end = `${upstream.localAddress?.replace(/^::ffff:/, '')} ${upstream.localPort}`;
  forwarded.add(end);
  upstream.once('close', () => forwarded.delete(end));
}

/** This process's egress proxy forwarded the connection whose peer is `address`:`port`, for a sandboxed run. */
export function forwardedForRun(address: string | undefined, port: number | undefined): boolean {
  return forwarded.has(`${address?.replace(/^::ffff:/, '')} ${port}`);
}
