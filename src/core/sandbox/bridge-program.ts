/**
 * Runs inside a sandbox with no network of its own (docs/security.md: Confining agents): it
 * listens on the sandbox's loopback where the agent expects the service and its loopback
 * endpoints (the same ports), plus a proxy port for `HTTPS_PROXY`, tunnels each connection
 * through the egress proxy's Unix socket, then runs the agent and ends as it ends.
 * Usage: sandbox-bridge -- COMMAND ARGS... with HEADLESS_SANDBOX_BRIDGE={"socket","forwards":["host:port"],"proxyPort"}.
 */
import { spawn } from 'node:child_process';
import { type Socket, connect, createServer } from 'node:net';

interface BridgeSettings {
  socket: string;
  forwards: string[];
  proxyPort: number;
}

const settings = JSON.parse(process.env.HEADLESS_SANDBOX_BRIDGE ?? '{}') as BridgeSettings;
const [command = '', ...args] = process.argv.slice(process.argv.indexOf('--') + 1);

/** Asks the egress proxy for a tunnel to `target`, then joins it to `client`. */
function forward(client: Socket, target: string): void {
  const upstream = connect(settings.socket, () => upstream.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`));
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    upstream.off('data', onData);
    if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1'))) return client.destroy();
    if (head.length > end + 4) client.write(head.subarray(end + 4));
    client.pipe(upstream).pipe(client);
  };
  upstream.on('data', onData);
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  client.on('close', () => upstream.destroy());
}

const listen = (port: number, host: string, handle: (client: Socket) => void) =>
  new Promise<void>((resolve, reject) => createServer(handle).once('error', reject).listen(port, host, resolve));

async function main(): Promise<void> {
  for (const target of settings.forwards) {
    const colon = target.lastIndexOf(':');
    await listen(Number(target.slice(colon + 1)), target.slice(0, colon).replace(/^\[|\]$/g, ''), (client) => forward(client, target));
  }
  // The proxy port speaks CONNECT itself: each connection goes to the egress proxy as it is.
  await listen(settings.proxyPort, '127.0.0.1', (client) => {
    const upstream = connect(settings.socket);
    client.pipe(upstream).pipe(client);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  const proxy = `http://127.0.0.1:${settings.proxyPort}`;
  const { HEADLESS_SANDBOX_BRIDGE: _, ...env } = process.env;
  const noProxy = 'localhost,127.0.0.1,::1';
  const child = spawn(command, args, {
    stdio: 'inherit',
    env: { ...env, HTTPS_PROXY: proxy, https_proxy: proxy, HTTP_PROXY: proxy, http_proxy: proxy, NO_PROXY: noProxy, no_proxy: noProxy },
  });
  // The run's signals reach the agent through its process group; this process waits for its end.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => undefined);
  child.on('error', (error) => {
    process.stderr.write(`${command}: ${error.message}\n`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`sandbox network: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(126);
});
