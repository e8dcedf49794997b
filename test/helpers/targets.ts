import { type ChildProcess, spawn } from 'node:child_process';
import { type RequestListener, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import express from 'express';
import { toNodeListener } from '../../src/adapters/node';
import { toExpressMiddleware } from '../../src/adapters/express';
import { type HeadlessHandler, type HeadlessHandlerOptions, createHeadlessHandler } from '../../src/core/index';

/** A response read whole, the same shape from every target. */
export interface Reply {
  status: number;
  headers: Record<string, string | undefined>;
  text: string;
  json<T = Record<string, any>>(): T;
}

export interface Target {
  /** Base URL the API lives under (with the mount path). */
  base: string;
  send(method: string, path: string, options?: { headers?: Record<string, string>; body?: string }): Promise<Reply>;
  close(): Promise<void>;
}

const reply = (status: number, headers: Record<string, string | undefined>, text: string): Reply => ({
  status,
  headers,
  text,
  json: () => JSON.parse(text),
});

/** Raw HTTP over a real socket, so Host and every other header are exactly what the test says. */
export function rawSender(base: string): Target['send'] {
  const url = new URL(base);
  return (method, path, options = {}) =>
    new Promise((done, fail) => {
      const body = options.body;
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          method,
          path: `${url.pathname.replace(/\/$/, '')}${path}`,
          headers: { host: url.host, ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }), ...options.headers },
          // Send the Host header exactly as given, even empty: node would otherwise fill it in.
          setHost: false,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => done(reply(res.statusCode!, res.headers as Record<string, string>, text)));
        },
      );
      req.on('error', fail);
      if (body !== undefined) req.write(body);
      req.end();
    });
}

export type TargetFactory = (options: HeadlessHandlerOptions) => Promise<Target>;

export const inProcess: TargetFactory = async (options) => {
  const handler = createHeadlessHandler(options);
  await handler.ready;
  return {
    base: 'http://localhost:47331',
    async send(method, path, o = {}) {
      const res = await handler.fetch(
        `http://localhost:47331${path}`,
        { method, headers: { host: 'localhost:47331', ...o.headers }, body: o.body },
        { remoteAddress: '127.0.0.1' },
      );
      return reply(res.status, Object.fromEntries(res.headers), await res.text());
    },
    close: () => handler.close(),
  };
};

function listen(server: ReturnType<typeof createServer>): Promise<number> {
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done((server.address() as AddressInfo).port)));
}

/** Serves `listener` on a loopback port; closing the target closes the server and the handler. */
async function serve(handler: HeadlessHandler, listener: RequestListener, mountPath = ''): Promise<Target> {
  const server = createServer(listener);
  const base = `http://127.0.0.1:${await listen(server)}${mountPath}`;
  return {
    base,
    send: rawSender(base),
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await handler.close();
    },
  };
}

export const nodeHttp: TargetFactory = async (options) => {
  const handler = createHeadlessHandler(options);
  await handler.ready;
  return serve(handler, toNodeListener(handler));
};

export const expressMounted: TargetFactory = async (options) => {
  const handler = createHeadlessHandler(options);
  await handler.ready;
  const app = express();
  app.get('/health', (_req, res) => void res.send('ok'));
  app.use('/agents', toExpressMiddleware(handler));
  return serve(handler, app, '/agents');
};

const DENO = resolve(__dirname, '../../node_modules/.bin/deno');
const children = new Set<ChildProcess>();

/** The built package served by real Deno (`deno` from the npm registry). */
export const deno: TargetFactory = (options) =>
  new Promise((done, fail) => {
    const child = spawn(DENO, ['run', '-A', resolve(__dirname, '../fixtures/deno-host.ts')], {
      cwd: resolve(__dirname, '../..'),
      env: { ...process.env, HEADLESS_TEST_OPTIONS: JSON.stringify(options), NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`deno did not listen:\n${out}`));
    }, 600_000);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const match = /listening on (http:\/\/\S+)\n/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      const base = match[1]!;
      done({
        base,
        send: rawSender(base),
        close: () =>
          new Promise((closed) => {
            const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(kill);
              children.delete(child);
              closed();
            });
            child.kill('SIGTERM');
          }),
      });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`deno exited (${code}):\n${out}`));
    });
  });

export function killTargets(): void {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
}
