/**
 * `fetch` over a Unix-domain socket, for a service that listens on one (`serve --socket`):
 * the client takes `unix:/path/to.sock` as its URL. Node's modules are loaded only then, so the
 * client still runs where there are none (a browser, Deno).
 */
export function unixSocketFetch(socketPath: string): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const [{ request }, { Readable }] = await Promise.all([import('node:http'), import('node:stream')]);
    const url = new URL(String(input));
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    return new Promise<Response>((resolve, reject) => {
      const req = request(
        { socketPath, path: `${url.pathname}${url.search}`, method: init.method ?? 'GET', headers: { host: 'localhost', ...headers } },
        (res) => {
          const answer = new Headers();
          for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') answer.set(name, value);
          const body = res.statusCode === 204 || res.statusCode === 304 ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>);
          resolve(new Response(body, { status: res.statusCode, headers: answer }));
        },
      );
      req.once('error', (error) => reject(new TypeError('fetch failed', { cause: error })));
      init.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')), { once: true });
      req.end(typeof init.body === 'string' ? init.body : undefined);
    });
  }) as typeof fetch;
}
