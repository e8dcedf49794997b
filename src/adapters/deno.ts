/**
 * Deno adapter. `Deno.serve` gives each request its connection info: the peer address reaches the
 * core from `info.remoteAddr.hostname`; the bound address is the `hostname` served on.
 */
import type { HeadlessHandler } from '../core/handler';

export interface DenoServeInfo {
  remoteAddr: { hostname: string; port?: number };
  /** Settles once the response is delivered; rejects when the client went away first (Deno 2.5+). */
  completed?: Promise<void>;
}

export interface DenoServeOptions {
  /** @default 47331 */
  port?: number;
  /** @default "127.0.0.1" */
  hostname?: string;
  onListen?: (address: { hostname: string; port: number }) => void;
  signal?: AbortSignal;
}

/** A `Deno.serve` handler for the core. */
export function toDenoHandler(handler: HeadlessHandler, hostname = '127.0.0.1'): (request: Request, info: DenoServeInfo) => Promise<Response> {
  return async (request, info) => {
    const { port } = info.remoteAddr;
    const context = { remoteAddress: info.remoteAddr.hostname, localAddress: hostname, ...(port === undefined ? {} : { remotePort: port }) };
    if (!info.completed) return handler.fetch(request, context);
    // A signal of its own, aborted once the exchange is over (delivered, or the client gone): what
    // the service needs, without touching Deno's request.signal, whose legacy behaviour Deno
    // announces at every start.
    const over = new AbortController();
    info.completed.then(
      () => over.abort(),
      () => over.abort(),
    );
    const { method, headers, body, url } = request;
    const init = { method, headers, signal: over.signal, ...(method === 'GET' || method === 'HEAD' ? {} : { body, duplex: 'half' }) };
    return handler.fetch(new Request(url, init as RequestInit), context);
  };
}

/** Serves the handler with `Deno.serve` on a loopback address by default. */
export function serveDeno(handler: HeadlessHandler, options: DenoServeOptions = {}): { finished: Promise<void>; shutdown(): Promise<void> } {
  const deno = (globalThis as { Deno?: { serve: (options: object, handler: unknown) => { finished: Promise<void>; shutdown(): Promise<void> } } }).Deno;
  if (!deno) throw new Error('serveDeno runs under Deno only');
  const hostname = options.hostname ?? '127.0.0.1';
  return deno.serve({ port: options.port ?? 47331, hostname, onListen: options.onListen, signal: options.signal }, toDenoHandler(handler, hostname));
}
