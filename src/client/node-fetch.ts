/**
 * `fetch` over one Node socket (TCP, TLS for `https:`, or a Unix-domain socket: `serve --socket`,
 * which the client takes as `unix:/path/to.sock`), answering with a light `Response` (status, ok,
 * headers.get, text, json, body): what the client reads. The caller CLI uses it for its one
 * request: Node's fetch (undici) costs about 30 ms of CPU to load and Node's `http` about 11 ms, a
 * third of a bare Node start on Node 22 and 24, where a socket costs 7 ms. The answer is read by
 * http-parser-js (docs/decisions.md). Node's modules are taken only when it is called, so the
 * client still loads where there are none (a browser, Deno without Node's modules).
 */
import type { Socket } from 'node:net';
import { HTTPParser } from 'http-parser-js';
import type { Readable } from 'node:stream';

export function nodeFetch(o: { socketPath?: string } = {}): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input));
    return exchange(url, head(url, init, o.socketPath), init, o.socketPath);
  }) as typeof fetch;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The request as it goes on the wire: one request per connection, which the service then closes. */
function head(url: URL, init: RequestInit, socketPath: string | undefined): string {
  if (init.body != null && typeof init.body !== 'string') throw new TypeError('this fetch sends a string body only');
  const method = init.method ?? 'GET';
  const fields: Record<string, string> = { host: socketPath ? 'localhost' : url.host, connection: 'close' };
  for (const [name, value] of Object.entries((init.headers ?? {}) as Record<string, string>)) fields[name.toLowerCase()] = value;
  if (init.body != null || ['POST', 'PUT', 'PATCH'].includes(method)) fields['content-length'] = String(Buffer.byteLength(init.body ?? ''));
  const lines = Object.entries(fields).map(([name, value]) => {
    if (!TOKEN.test(name) || /[\r\n\0]/.test(value)) throw new TypeError(`invalid header: ${JSON.stringify(name)}`);
    return `${name}: ${value}\r\n`;
  });
  if (!TOKEN.test(method) || !url.pathname.startsWith('/')) throw new TypeError(`invalid request: ${method} ${url.pathname}`);
  return `${method} ${url.pathname}${url.search} HTTP/1.1\r\n${lines.join('')}\r\n${init.body ?? ''}`;
}

/** Opens the connection: the Unix-domain socket, TLS for `https:`, else TCP. */
function open(url: URL, socketPath: string | undefined): Socket {
  const net = process.getBuiltinModule('node:net');
  if (socketPath) return net.connect({ path: socketPath });
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (url.protocol === 'https:') {
    const tls = process.getBuiltinModule('node:tls');
    return tls.connect({ host, port: Number(url.port || 443), ...(net.isIP(host) ? {} : { servername: host }) });
  }
  if (url.protocol !== 'http:') throw new TypeError(`fetch failed: ${url.protocol} is neither http: nor https:`);
  return net.connect({ host, port: Number(url.port || 80) });
}

/**
 * Sends the request and resolves at the answer's head; its body streams on. A failure before the
 * head rejects as fetch does (a TypeError whose cause says why); after it, the body errs.
 */
function exchange(url: URL, request: string, init: RequestInit, socketPath: string | undefined): Promise<Response> {
  const { Readable } = process.getBuiltinModule('node:stream');
  return new Promise<Response>((resolve, reject) => {
    const socket = open(url, socketPath);
    const parser = new HTTPParser(HTTPParser.RESPONSE);
    let body: Readable | undefined;
    let settled = false;
    // The exchange ends once, by its answer's end or by a failure: the socket goes, the abort with it.
    const settle = () => {
      if (settled) return false;
      settled = true;
      init.signal?.removeEventListener('abort', aborted);
      socket.destroy();
      return true;
    };
    const fail = (error: Error) => {
      if (!settle()) return;
      if (body) body.destroy(error);
      else reject(new TypeError('fetch failed', { cause: error }));
    };
    const aborted = () => fail(new Error('aborted'));
    parser[HTTPParser.kOnHeadersComplete] = (info) => {
      // An interim answer (1xx) is followed by the real one.
      if (info.statusCode < 200) return;
      body = new Readable({ read: () => void socket.resume() });
      resolve(answer(info.statusCode, info.headers, body));
      return init.method === 'HEAD' ? 1 : 0;
    };
    parser[HTTPParser.kOnBody] = (chunk, offset, length) => {
      if (!body?.push(chunk.subarray(offset, offset + length))) socket.pause();
    };
    parser[HTTPParser.kOnMessageComplete] = () => {
      if (body && settle()) body.push(null);
    };
    const read = (result: unknown) => {
      if (result instanceof Error) fail(result);
    };
    socket.on('data', (data: Buffer) => read(parser.execute(data)));
    socket.on('end', () => read(parser.finish()));
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('the connection closed before the answer ended')));
    init.signal?.addEventListener('abort', aborted, { once: true });
    if (init.signal?.aborted) aborted();
    else socket.write(request);
  });
}

/** The parts of a `Response` the client reads. */
function answer(status: number, raw: string[], stream: Readable): Response {
  const headers = new Map<string, string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const [name, value] = [raw[i] as string, raw[i + 1] as string];
    const before = headers.get(name.toLowerCase());
    headers.set(name.toLowerCase(), before === undefined ? value : `${before}, ${value}`);
  }
  let body: ReadableStream<Uint8Array> | null | undefined;
  const text = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  return {
    status,
    ok: status >= 200 && status <= 299,
    headers: { get: (name: string) => headers.get(name.toLowerCase()) ?? null },
    get body() {
      const { Readable } = process.getBuiltinModule('node:stream');
      body ??= status === 204 || status === 304 ? null : (Readable.toWeb(stream) as ReadableStream<Uint8Array>);
      return body;
    },
    text,
    json: async () => JSON.parse(await text()),
  } as unknown as Response;
}
