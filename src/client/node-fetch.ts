/**
 * `fetch` over Node's own `http`, `https` or a Unix-domain socket (`serve --socket`; the client
 * takes `unix:/path/to.sock` as its URL), answering with a light `Response` (status, ok,
 * headers.get, text, json, body): what the client reads. The caller CLI uses it, so one command
 * does not load Node's fetch (undici, about 30 ms of CPU) for its one request. Node's modules are
 * taken only when it is called, so the client still runs where there are none (a browser, Deno).
 */
import type { IncomingMessage } from 'node:http';

export function nodeFetch(o: { socketPath?: string } = {}): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(String(input));
    // Taken as Node's own objects: an ESM import of a built-in reads every export, and on Node 24
    // node:http's include a getter that loads undici (a quarter of a caller command's CPU).
    const { request } = process.getBuiltinModule(url.protocol === 'https:' && !o.socketPath ? 'node:https' : 'node:http') as typeof import('node:http');
    const { Readable } = process.getBuiltinModule('node:stream');
    const headers: Record<string, string> = { ...(init.headers as Record<string, string> | undefined) };
    const target = o.socketPath ? { socketPath: o.socketPath, headers: { host: 'localhost', ...headers } } : { host: url.hostname, port: url.port, headers };
    return new Promise<Response>((resolve, reject) => {
      const req = request({ ...target, path: `${url.pathname}${url.search}`, method: init.method ?? 'GET' }, (res: IncomingMessage) =>
        resolve(answer(res, () => Readable.toWeb(res) as ReadableStream<Uint8Array>)),
      );
      req.once('error', (error: Error) => reject(new TypeError('fetch failed', { cause: error })));
      init.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')), { once: true });
      req.end(typeof init.body === 'string' ? init.body : undefined);
    });
  }) as typeof fetch;
}

/** The parts of a `Response` the client reads, over Node's answer. */
function answer(res: IncomingMessage, web: () => ReadableStream<Uint8Array>): Response {
  const status = res.statusCode ?? 0;
  let body: ReadableStream<Uint8Array> | null | undefined;
  const text = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  return {
    status,
    ok: status >= 200 && status <= 299,
    headers: { get: (name: string) => [res.headers[name.toLowerCase()]].flat()[0] ?? null },
    get body() {
      body ??= status === 204 || status === 304 ? null : web();
      return body;
    },
    text,
    json: async () => JSON.parse(await text()),
  } as unknown as Response;
}
