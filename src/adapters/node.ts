/**
 * node:http adapter. The peer address reaches the core from `req.socket.remoteAddress`, read
 * here from the socket itself (never from a header), with the bound `localAddress`.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { HeadlessHandler, HeadlessServerContext } from '../core/handler';

/**
 * Runs the core on a Node request and sends its answer. Every core answer is a short JSON string,
 * sent in one write with its headers (whatwg-node's generic sender writes body and end apart).
 */
export async function handleNodeRequest(handler: HeadlessHandler, req: IncomingMessage, res: ServerResponse, context: HeadlessServerContext): Promise<void> {
  const response = await handler.handleNodeRequestAndResponse(req, res, context);
  const body = await response.text();
  const headers: Record<string, string> = {};
  response.headers.forEach((value, key) => {
    headers[key] = value;
  });
  res.writeHead(response.status, headers);
  res.end(body);
}

export function toNodeListener(handler: HeadlessHandler): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handleNodeRequest(handler, req, res, { remoteAddress: req.socket.remoteAddress, localAddress: req.socket.localAddress }).catch((error: unknown) => {
      handler.log('could not answer a request', error);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };
}

/** A node:http server for the handler; closing the server also closes the handler. */
export function createNodeServer(handler: HeadlessHandler): Server {
  const server = createServer(toNodeListener(handler));
  server.on('close', () => void handler.close());
  return server;
}
