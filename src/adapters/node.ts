/**
 * node:http adapter. The peer address reaches the core from `req.socket.remoteAddress`, read
 * here from the socket itself (never from a header), with the bound `localAddress`.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';
import { Readable } from 'node:stream';
import type { HeadlessHandler, HeadlessServerContext } from '../core/handler';

/** Answers that stream (run events) are written as they come; every other one is short JSON. */
const STREAMED = /^(text\/event-stream|application\/x-ndjson)/;

/**
 * Runs the core on a Node request and sends its answer. A JSON answer goes in one write with
 * its headers (whatwg-node's generic sender writes body and end apart); a stream as it comes.
 */
export async function handleNodeRequest(handler: HeadlessHandler, req: IncomingMessage, res: ServerResponse, context: HeadlessServerContext): Promise<void> {
  const response = await handler.handleNodeRequestAndResponse(req, res, context);
  const headers: Record<string, string> = {};
  response.headers.forEach((value, key) => {
    headers[key] = value;
  });
  // Asked in this order: whatwg-node makes a stream for `body` on first read, even of a string.
  if (STREAMED.test(headers['content-type'] ?? '') && response.body) {
    res.writeHead(response.status, headers);
    res.flushHeaders();
    const source = nodeReadable(response.body);
    // pipe waits for the socket to drain; the stream is let go when the answer is done or the client goes away.
    await new Promise<void>((resolve) => {
      source.once('error', (error) => {
        handler.log('an event stream failed', error);
        res.destroy(error);
      });
      res.once('close', () => {
        source.destroy();
        resolve();
      });
      source.pipe(res);
    });
    return;
  }
  const body = await response.text();
  res.writeHead(response.status, headers);
  res.end(body);
}

/** whatwg-node's streams are Node streams inside: pipe that one, skipping the web-stream layer. */
const nodeReadable = (body: ReadableStream<Uint8Array>): Readable =>
  (body as { readable?: Readable }).readable ?? Readable.from(body as unknown as AsyncIterable<Uint8Array>, { objectMode: false });

/**
 * What the core reads of the connection: the peer's address and port and ours, and the socket's
 * descriptor (node keeps it on its handle; no public API gives it), by which the process at the
 * other end is found when it answers a permission question (docs/approvals.md).
 */
export function connectionOf(socket: Socket): HeadlessServerContext {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return {
    remoteAddress: socket.remoteAddress,
    localAddress: socket.localAddress,
    ...(socket.remotePort === undefined ? {} : { remotePort: socket.remotePort }),
    ...(socket.localPort === undefined ? {} : { localPort: socket.localPort }),
    ...(typeof fd === 'number' && fd >= 0 ? { socketFd: fd } : {}),
  };
}

export function toNodeListener(handler: HeadlessHandler, options: { unixSocket?: boolean } = {}): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const context = { ...connectionOf(req.socket), unixSocket: options.unixSocket === true };
    handleNodeRequest(handler, req, res, context).catch((error: unknown) => {
      handler.log('could not answer a request', error);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };
}

/**
 * Sockets are bounded before anyone is authenticated: headers must arrive within 10 s and a whole
 * request within 30 s (checked every second), so connections that never finish cannot pile up.
 * Answers (event streams) may last as long as they like.
 */
const LIMITS = { headersTimeout: 10_000, requestTimeout: 30_000, connectionsCheckingInterval: 1_000 };

/**
 * A node:http server for the handler; closing the server also closes the handler. `unixSocket`:
 * it will listen on a Unix-domain socket, whose file mode decides who may call.
 */
export function createNodeServer(handler: HeadlessHandler, options: { unixSocket?: boolean } = {}): Server {
  const server = createServer(LIMITS, toNodeListener(handler, options));
  server.on('close', () => void handler.close());
  return server;
}
