import type { IncomingMessage, ServerResponse } from 'node:http';
import { createDefaultGate } from './http/auth';
import { type HeadlessServerContext, createPipeline } from './http/pipeline';
import { ROUTES } from './http/routes/index';
import type { HeadlessHandlerOptions } from './options';
import { type Log, consoleLogger, errorLog } from './logger';
import { buildResources } from './resources';

export type { HeadlessHandlerOptions } from './options';
export type { HeadlessServerContext } from './http/pipeline';
export type { WorkspaceResolver } from './workspaces';

/**
 * The handler (built on `@whatwg-node/server`, whose types it does not expose, so a host's
 * TypeScript needs none of its newer library types): a fetch-style function, a node:http
 * listener through the adapters, and its lifecycle.
 */
export interface HeadlessHandler {
  /** Answers a request, with the adapter's context (the peer address decides who is local). */
  fetch(request: Request, context?: HeadlessServerContext): Promise<Response> | Response;
  fetch(url: string | URL, init?: RequestInit, context?: HeadlessServerContext): Promise<Response> | Response;
  /** Answers a node:http request on its response (what the node and Express adapters call). */
  handleNodeRequestAndResponse(req: IncomingMessage, res: ServerResponse, context: HeadlessServerContext): Promise<Response> | Response;
  /** Closes it, as `close()` does; `await using` calls it too. */
  dispose(): Promise<void> | void;
  /** Settles when the store is loaded and crash recovery is done; rejects if that failed. */
  ready: Promise<void>;
  /** Graceful shutdown: refuse new starts, stop running runs (recorded `interrupted`), close the store. `dispose()` and `await using` do the same. */
  close(): Promise<void>;
  /** Where the handler reports the errors it handled (to the `logger` option); adapters report theirs here too. */
  log: Log;
}

/**
 * The headless-run API as a fetch-style handler: `(Request, context?) => Promise<Response>`,
 * also usable as a node:http listener or Express middleware through the adapters. The
 * composition root: it builds every unit once (resources.ts) and puts the request pipeline in
 * front of them.
 *
 * @example
 * const handler = createHeadlessHandler({ workspaces: [{ id: 'demo', path: '/srv/demo' }] });
 * const res = await handler.fetch('http://localhost/api/headless?wsId=demo', { headers: { host: 'localhost' } }, { remoteAddress: '127.0.0.1' });
 */
export function createHeadlessHandler(options: HeadlessHandlerOptions): HeadlessHandler {
  const logger = options.logger ?? consoleLogger;
  const log = errorLog(logger);
  const resources = buildResources(options, logger);
  const ready = resources.start();
  ready.catch(() => undefined);
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= ready.catch(() => undefined).then(() => resources.close());
    return closing;
  };
  const adapter = createPipeline({
    routes: ROUTES,
    services: resources.services,
    tokens: resources.tokens,
    gate: options.authorize ?? createDefaultGate({ adminToken: options.adminToken, publicHosts: options.publicHosts, localCallers: options.localCallers }),
    customGate: options.authorize !== undefined,
    basePath: options.basePath,
    apiUrl: () => options.apiUrl,
    ready,
    log,
    close,
  });
  return Object.assign(adapter, { ready, log, close }) as unknown as HeadlessHandler;
}
