/**
 * node:http adapter. The peer address reaches the core from `req.socket.remoteAddress`, read
 * here from the socket itself (never from a header), with the bound `localAddress`.
 */
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { HeadlessHandler } from '../core/handler';

export function toNodeListener(handler: HeadlessHandler): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void handler.handle(req, res, {
      remoteAddress: req.socket.remoteAddress,
      localAddress: req.socket.localAddress,
    });
  };
}

/** A node:http server for the handler; closing the server also closes the handler. */
export function createNodeServer(handler: HeadlessHandler): Server {
  const server = createServer(toNodeListener(handler));
  server.on('close', () => void handler.close());
  return server;
}
