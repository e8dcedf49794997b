import { isIP } from 'node:net';
import { secretsEqual } from './ids';
import { HttpProblem } from './problem';

/** What the gate knows about a request beyond the request itself. */
export interface AuthContext {
  /** The TCP peer address, as the adapter read it from the socket. Absent: treated as remote. */
  remoteAddress?: string;
  /** The address the server socket is bound to; accepted as a Host name. */
  localAddress?: string;
  /** The matched route, e.g. `runs.start`, `inbox.push`, or `unknown`. */
  route: string;
  /** The workspace the route addresses, if any. */
  workspaceId?: string;
  /** Set when the request's Bearer token is a live run token. */
  runToken?: { taskId: string; workspaceId: string; resumeId: string };
}

/**
 * Replaces the default gate. Return true to let the request through, false for 401; throw an
 * `HttpProblem` for any other answer. A live run token presented for its own workspace's Inbox
 * push is accepted by the core before the hook is asked.
 */
export type Authorize = (request: Request, context: AuthContext) => boolean | Promise<boolean>;

export interface GateOptions {
  /** Compared in constant time. Absent: non-local callers always get 401. */
  adminToken?: string;
  /** Extra Host names accepted (behind a TLS proxy). */
  publicHosts?: string[];
}

const LOCAL_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (plain === '::1') return true;
  return isIP(plain) === 4 && plain.startsWith('127.');
}

/** The host name of a Host header or an Origin's authority, lower-cased, port removed. */
function hostName(authority: string): string | undefined {
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(authority);
  return match ? match[1]!.toLowerCase() : undefined;
}

function boundName(address: string | undefined): string | undefined {
  if (!address) return undefined;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return isIP(plain) === 6 ? `[${plain.toLowerCase()}]` : plain.toLowerCase();
}

const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

export function bearerToken(request: Request): string | undefined | null {
  const header = request.headers.get('authorization');
  if (header === null) return undefined;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  return match ? match[1]! : null;
}

/** 401; a wrong token and a missing one look the same. */
export function unauthorized(): HttpProblem {
  return new HttpProblem('unauthorized', 'Valid credentials are required.', { headers: { 'www-authenticate': 'Bearer' } });
}

/**
 * The default gate of contract §6, in its order: Host allow-list (DNS rebinding), Origin and
 * Sec-Fetch-Site (browser pages), then credentials. Local means a loopback peer, no forwarding
 * header (a same-host proxy must not make the internet local) and a loopback Host.
 */
export function createDefaultGate(options: GateOptions): Authorize {
  const publicHosts = new Set((options.publicHosts ?? []).map((h) => h.toLowerCase()));
  const adminToken = options.adminToken;

  return (request, context) => {
    const accepted = (name: string | undefined) =>
      name !== undefined && (LOCAL_NAMES.has(name) || publicHosts.has(name) || name === boundName(context.localAddress));

    const host = request.headers.get('host');
    const name = host ? hostName(host.trim()) : undefined;
    if (!accepted(name)) throw new HttpProblem('forbidden', 'The Host header is not one this service answers to.');

    const origin = request.headers.get('origin');
    if (origin !== null) {
      const match = /^https?:\/\/([^/]+)$/i.exec(origin.trim());
      if (!match || !accepted(hostName(match[1]!))) throw new HttpProblem('forbidden', 'Cross-origin requests are refused.');
    }
    const site = request.headers.get('sec-fetch-site');
    if (site !== null && site !== 'none' && site !== 'same-origin') {
      throw new HttpProblem('forbidden', 'Cross-site requests are refused.');
    }

    const token = bearerToken(request);
    if (token === null) throw unauthorized();
    if (token !== undefined) {
      if (adminToken !== undefined && secretsEqual(token, adminToken)) return true;
      if (context.runToken && context.route === 'inbox.push' && context.runToken.workspaceId === context.workspaceId) return true;
      throw unauthorized();
    }

    const local =
      isLoopbackAddress(context.remoteAddress) &&
      FORWARDING_HEADERS.every((h) => !request.headers.has(h)) &&
      name !== undefined &&
      LOCAL_NAMES.has(name);
    return local;
  };
}
