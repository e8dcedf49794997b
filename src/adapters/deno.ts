/**
 * Deno adapter. `Deno.serve` gives each request its connection info: the peer address reaches the
 * core from `info.remoteAddr.hostname`; the bound address is the `hostname` served on.
 */
import type { HeadlessHandler } from '../core/handler';

export interface DenoServeInfo {
  remoteAddr: { hostname: string };
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
  return async (request, info) => handler.fetch(request, { remoteAddress: info.remoteAddr.hostname, localAddress: hostname });
}

/** Serves the handler with `Deno.serve` on a loopback address by default. */
export function serveDeno(handler: HeadlessHandler, options: DenoServeOptions = {}): { finished: Promise<void>; shutdown(): Promise<void> } {
  const deno = (globalThis as { Deno?: { serve: (options: object, handler: unknown) => { finished: Promise<void>; shutdown(): Promise<void> } } }).Deno;
  if (!deno) throw new Error('serveDeno runs under Deno only');
  const hostname = options.hostname ?? '127.0.0.1';
  return deno.serve({ port: options.port ?? 47331, hostname, onListen: options.onListen, signal: options.signal }, toDenoHandler(handler, hostname));
}
