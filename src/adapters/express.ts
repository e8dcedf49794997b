/**
 * Express adapter: `app.use('/agents', toExpressMiddleware(handler))`. The peer address reaches
 * the core from `req.socket.remoteAddress` (never `req.ip`, which trusts forwarding headers under
 * `trust proxy`), and the mount path from `req.baseUrl`, so no `basePath` is needed. Mount it
 * before any body parser: the core reads the raw body itself, with its own size limit.
 */
import type { NextFunction, Request, Response } from 'express';
import type { HeadlessHandler } from '../core/handler';
import { connectionOf, handleNodeRequest } from './node';

export function toExpressMiddleware(handler: HeadlessHandler): (req: Request, res: Response, next: NextFunction) => void {
  return (req, res, next) => {
    handleNodeRequest(handler, req, res, { ...connectionOf(req.socket), mountPath: req.baseUrl }).catch(next);
  };
}
