import { spawn } from 'node:child_process';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Git's own smart HTTP server (`git http-backend`) behind a small CGI bridge on loopback, with
 * HTTP basic authentication checked: what a forge's push endpoint is, without a forge.
 */
export interface GitHttpServer {
  /** `http://127.0.0.1:<port>/` + a repository's folder name under the root. */
  url: string;
  /** The Authorization headers each request came with, in order. */
  authorizations: Array<string | undefined>;
  close(): Promise<void>;
}

export async function startGitHttp(root: string, user: string, password: string): Promise<GitHttpServer> {
  const expected = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const authorizations: Array<string | undefined> = [];
  const server: Server = createServer((req, res) => {
    authorizations.push(req.headers.authorization);
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const backend = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        REMOTE_USER: user,
        REMOTE_ADDR: '127.0.0.1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    });
    req.pipe(backend.stdin);
    const chunks: Buffer[] = [];
    backend.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    backend.on('close', () => reply(res, Buffer.concat(chunks)));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    authorizations,
    close: () => new Promise((done) => server.close(() => done())),
  };
}

/** A CGI answer (headers, a blank line, the body) as an HTTP response. */
function reply(res: import('node:http').ServerResponse, output: Buffer): void {
  let end = output.indexOf('\r\n\r\n');
  let skip = 4;
  if (end < 0) {
    end = output.indexOf('\n\n');
    skip = 2;
  }
  const head = output.subarray(0, Math.max(0, end)).toString('utf8');
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
    else headers[name] = value;
  }
  res.writeHead(status, headers).end(end < 0 ? output : output.subarray(end + skip));
}
