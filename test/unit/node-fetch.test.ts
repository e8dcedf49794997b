import { mkdtempSync, rmSync } from 'node:fs';
import { type Server, type Socket, createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeFetch } from '../../src/client/node-fetch';

/**
 * The caller's transport (src/client/node-fetch.ts) against a raw socket server that answers
 * exactly the bytes a test gives it: what goes on the wire, and each way an answer can arrive.
 */

interface Raw {
  url: string;
  /** The bytes of each request, as received until the test answered. */
  requests: string[];
  server: Server;
}

const servers: Server[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((done) => s.close(done))));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A server that, once a request's head has arrived, hands the socket to `answer`. */
async function raw(answer: (socket: Socket, request: string) => void, listen: { path?: string; host?: string } = {}): Promise<Raw> {
  const requests: string[] = [];
  const server = createServer((socket) => {
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end === -1) return;
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      requests.push(text);
      socket.removeAllListeners('data');
      answer(socket, text);
    });
    socket.on('error', () => undefined);
  });
  servers.push(server);
  await new Promise<void>((done) => (listen.path ? server.listen(listen.path, done) : server.listen(0, listen.host ?? '127.0.0.1', done)));
  const address = server.address();
  const host = listen.host === '::1' ? '[::1]' : '127.0.0.1';
  const url = typeof address === 'object' && address ? `http://${host}:${address.port}` : 'http://localhost';
  return { url, requests, server };
}

/** Writes the parts with a turn of the event loop between them, so the client reads them apart. */
async function dribble(socket: Socket, parts: string[]): Promise<void> {
  for (const part of parts) {
    socket.write(part);
    await new Promise((done) => setTimeout(done, 5));
  }
}

const fetch = nodeFetch();

describe('nodeFetch', () => {
  it('sends one request, closing the connection after it: method, path with query, host, headers and the body with its length', async () => {
    const s = await raw((socket) => socket.end('HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'));
    const res = await fetch(`${s.url}/api/x/y?a=1&b=%20`, {
      method: 'POST',
      headers: { Authorization: 'Bearer t', 'content-type': 'application/json' },
      body: '{"é":1}',
    });
    expect(res.status).toBe(201);
    expect(res.ok).toBe(true);
    expect(res.headers.get('Content-Type')).toBe('application/json');
    expect(await res.json()).toEqual({ ok: true });
    const [request] = s.requests;
    const [head, body] = request!.split('\r\n\r\n');
    const [line, ...fields] = head!.split('\r\n');
    expect(line).toBe('POST /api/x/y?a=1&b=%20 HTTP/1.1');
    expect(fields.sort()).toEqual([
      'authorization: Bearer t',
      'connection: close',
      'content-length: 8',
      'content-type: application/json',
      `host: ${new URL(s.url).host}`,
    ]);
    expect(Buffer.from(body!, 'latin1').toString('utf8')).toBe('{"é":1}');
  });

  it('reads an answer however it is cut: a head split mid-line, a body by its length, repeated headers joined', async () => {
    const s = await raw(
      (socket) => void dribble(socket, ['HTTP/1.1 200 OK\r\nX-A: 1\r\nX-', 'A: 2\r\nContent-Le', 'ngth: 10\r\n\r\n01234', '56789']).then(() => socket.end()),
    );
    const res = await fetch(`${s.url}/`);
    expect(res.headers.get('x-a')).toBe('1, 2');
    expect(res.headers.get('missing')).toBeNull();
    expect(await res.text()).toBe('0123456789');
  });

  it('reads a chunked body and a body that ends when the connection does', async () => {
    const chunked = await raw(
      (socket) => void dribble(socket, ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n', '5\r\npedia\r\n0\r\n\r\n']),
    );
    expect(await (await fetch(`${chunked.url}/`)).text()).toBe('Wikipedia');
    const untilClose = await raw((socket) => void dribble(socket, ['HTTP/1.0 200 OK\r\n\r\nab', 'cd']).then(() => socket.end()));
    expect(await (await fetch(`${untilClose.url}/`)).text()).toBe('abcd');
  });

  it('skips an interim answer (100 Continue) for the final one; a 204 has no body', async () => {
    const s = await raw((socket) => socket.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n'));
    const res = await fetch(`${s.url}/`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(res.body).toBeNull();
    expect(await res.text()).toBe('');
  });

  it('streams the body as it comes (Server-Sent Events), before the answer ends', async () => {
    let finish: () => void = () => undefined;
    const s = await raw((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata: 1\r\n');
      finish = () => socket.end('8\r\n\ndata: 2\r\n0\r\n\r\n');
    });
    const res = await fetch(`${s.url}/events`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    expect(decoder.decode((await reader.read()).value)).toBe('data: 1');
    finish();
    let rest = '';
    for (let next = await reader.read(); !next.done; next = await reader.read()) rest += decoder.decode(next.value);
    expect(rest).toBe('\ndata: 2');
  });

  it('rejects as fetch does, a TypeError with its cause, when there is no answer: refused, not HTTP, or closed before the head', async () => {
    const closed = await raw((socket) => socket.destroy());
    await new Promise((done) => closed.server.close(done));
    const refused = await fetch(`${closed.url}/`).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TypeError);
    expect((refused as TypeError).message).toBe('fetch failed');
    expect(((refused as TypeError).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');

    const garbage = await raw((socket) => socket.end('SSH-2.0-OpenSSH_9.2\r\n\r\n'));
    const notHttp = await fetch(`${garbage.url}/`).catch((e: unknown) => e);
    expect(notHttp).toBeInstanceOf(TypeError);
    expect((notHttp as TypeError).cause).toBeInstanceOf(Error);

    const hangUp = await raw((socket) => socket.end());
    const noAnswer = await fetch(`${hangUp.url}/`).catch((e: unknown) => e);
    expect(((noAnswer as TypeError).cause as Error).message).toMatch(/closed before the answer ended/);
  });

  it('errs the body of an answer cut short, rather than passing off part of it as the whole', async () => {
    const s = await raw((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234'));
    const res = await fetch(`${s.url}/`);
    await expect(res.text()).rejects.toThrow();
  });

  it('an abort ends the exchange: before the answer it rejects, during the body the body errs', async () => {
    const silent = await raw(() => undefined);
    const before = new AbortController();
    const pending = fetch(`${silent.url}/`, { signal: before.signal });
    before.abort();
    await expect(pending).rejects.toThrow('fetch failed');
    const already = AbortSignal.abort();
    await expect(fetch(`${silent.url}/`, { signal: already })).rejects.toThrow('fetch failed');

    const open = await raw((socket) => socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n'));
    const during = new AbortController();
    const res = await fetch(`${open.url}/`, { signal: during.signal });
    const reading = res.text();
    during.abort();
    await expect(reading).rejects.toThrow('aborted');
  });

  it('refuses, sending nothing, a header that would split the request, a method that is not a token, or a body that is not text', async () => {
    const s = await raw((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
    await expect(fetch(`${s.url}/`, { headers: { authorization: 'Bearer x\r\nX-Admin: 1' } })).rejects.toThrow(TypeError);
    await expect(fetch(`${s.url}/`, { headers: { 'bad name': 'x' } })).rejects.toThrow(TypeError);
    await expect(fetch(`${s.url}/`, { method: 'GET /admin HTTP/1.1\r\n' })).rejects.toThrow(TypeError);
    await expect(fetch(`${s.url}/`, { method: 'POST', body: new Uint8Array([1]) as unknown as string })).rejects.toThrow(/string body/);
    await expect(fetch('ftp://127.0.0.1/')).rejects.toThrow(/neither http: nor https:/);
    expect(s.requests).toEqual([]);
  });

  it('reaches a Unix-domain socket, saying host: localhost', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-fetch-'));
    dirs.push(dir);
    const path = join(dir, 's.sock');
    const unix = await raw((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nunix'), { path });
    expect(await (await nodeFetch({ socketPath: path })('http://localhost/api/version')).text()).toBe('unix');
    expect(unix.requests[0]).toMatch(/^GET \/api\/version HTTP\/1\.1\r\n(.*\r\n)*host: localhost\r\n/);
  });

  // A machine (or container) may have no IPv6 loopback at all.
  const ipv6 = Object.values(networkInterfaces()).some((list) => list?.some((a) => a.address === '::1'));
  it.runIf(ipv6)('reaches an IPv6 address, its brackets off for the connection and on in the host', async () => {
    const v6 = await raw((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6'), { host: '::1' });
    expect(await (await fetch(`${v6.url}/`)).text()).toBe('v6');
    expect(v6.requests[0]).toContain(`host: ${new URL(v6.url).host}\r\n`);
  });
});
