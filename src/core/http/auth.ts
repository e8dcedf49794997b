import { isIP } from 'node:net';
import { sha256, secretMatcher } from '../util/ids';
import { FailedAttempts } from './failed-attempts';
import { HttpProblem } from '../../contract/problems';
import type { RunTokenGrant, RunTokens } from '../runs/tokens';
import type { RouteServices } from './route-services';
import { forwardedForRun } from '../sandbox/egress-proxy';

/**
 * Who a route lets in, declared on the route itself: a verifier the pipeline runs before the
 * route's handler. The built-in ones, by name:
 * - `caller`: the gate's caller (a local one, or one with the admin token, or whom the custom hook lets in).
 * - `caller or own run token`: also a live run token, for its own run's workspace (an agent reporting).
 * - `caller or run token`: also any live run token; what it then asks is decided again, call by call (MCP).
 * - `anyone`: no gate at all, for probes that carry nothing but a status (health, readiness).
 * A route for a remote sender that cannot hold the admin token (a signed webhook) declares a
 * verifier of its own, which alone decides, and opens nothing else. What a verifier returns (what
 * it verified: a sender's trigger and the body it read) is handed to the route's handler.
 */
export type RouteAuth<V = unknown> = BuiltinAuth | RouteVerifier<V>;
export type BuiltinAuth = 'caller' | 'caller or own run token' | 'caller or run token' | 'anyone';

export interface RouteVerifier<V = void> {
  /** Its name, as a custom gate sees it (`AuthContext.auth`). */
  readonly name: string;
  /** The run tokens it takes: none, those of the run's own workspace, any. */
  readonly runTokens: 'none' | 'own' | 'any';
  /** The OpenAPI security alternatives it accepts (`{}`: none needed). */
  readonly security: ReadonlyArray<Record<string, string[]>>;
  /** Lets the request in, answering what it verified (the handler's `verified`), or throws the problem that answers it (401, 403, ...). */
  verify(request: Request, context: VerifyContext): Promise<V>;
}

/** What a verifier is given: the request's auth context and the installation's gate. */
export interface VerifyContext {
  auth: AuthContext;
  /** The gate: the default one, or the library user's `authorize` hook. */
  gate: Authorize;
  /** The gate is the library user's hook: it is never asked about run tokens. */
  customGate: boolean;
  /** The matched route's path parameters. */
  params: Record<string, string>;
  /** What the routes call: a sender's verifier finds its trigger there. */
  services: RouteServices;
}

/** A gate's verifier: the core's run-token rule, then the gate. */
function gated(name: BuiltinAuth, runTokens: RouteVerifier['runTokens']): RouteVerifier {
  const bearer: Array<Record<string, string[]>> = [{}, { adminToken: [] }];
  return {
    name,
    runTokens,
    security: runTokens === 'none' ? bearer : [...bearer, { runToken: [] }],
    async verify(request, { auth, gate, customGate }) {
      const { credential } = auth;
      if (customGate && credential.kind === 'run') {
        if (credential.inScope) return;
        throw unauthorized();
      }
      if (!(await gate(request, auth))) throw unauthorized();
    },
  };
}

const BUILTIN: Record<BuiltinAuth, RouteVerifier> = {
  caller: gated('caller', 'none'),
  'caller or own run token': gated('caller or own run token', 'own'),
  'caller or run token': gated('caller or run token', 'any'),
  anyone: { name: 'anyone', runTokens: 'none', security: [{}], verify: async () => undefined },
};

/** The verifier a route declares (a request that matches no route is gated as `caller`). */
export const verifierOf = (auth: RouteAuth | undefined): RouteVerifier<unknown> =>
  auth === undefined ? BUILTIN.caller : typeof auth === 'string' ? BUILTIN[auth] : auth;

/**
 * The request's credential, read once from its `Authorization` header. A live run token is
 * valid only where the route declares it (`RouteAuth`): `inScope` is that rule,
 * decided once.
 */
export type Credential =
  | { kind: 'none' }
  /** An `Authorization` header that is not `Bearer <token>`. */
  | { kind: 'malformed' }
  /** A Bearer token that is not a live run token: the admin token, or nothing valid. `digest`: its SHA-256 (`sha256`). */
  | { kind: 'bearer'; token: string; digest: string }
  | { kind: 'run'; grant: RunTokenGrant; inScope: boolean };

/** Reads the credential; a run token is in scope where the route's verifier takes one. */
export function readCredential(request: Request, tokens: RunTokens, verifier: RouteVerifier<unknown>, workspaceId: string | undefined): Credential {
  const header = request.headers.get('authorization');
  if (header === null) return { kind: 'none' };
  const [, token] = /^Bearer +([^\s]+) *$/i.exec(header) ?? [];
  if (token === undefined) return { kind: 'malformed' };
  const digest = sha256(token);
  const grant = tokens.lookup(digest);
  if (!grant) return { kind: 'bearer', token, digest };
  return { kind: 'run', grant, inScope: verifier.runTokens === 'any' || (verifier.runTokens === 'own' && grant.workspaceId === workspaceId) };
}

/** What the gate knows about a request beyond the request itself. */
export interface AuthContext {
  /** The TCP peer address, as the adapter read it from the socket. Absent: treated as remote. */
  remoteAddress?: string;
  /** The address the server socket is bound to; accepted as a Host name. */
  localAddress?: string;
  /** Through a Unix-domain socket (`serve --socket`): the file's mode decided who may connect. */
  unixSocket?: boolean;
  /** The TCP peer's port, and ours, where the adapter read them. */
  remotePort?: number;
  localPort?: number;
  /** The accepted Unix-domain socket's descriptor, where the adapter read it. */
  socketFd?: number;
  /** The matched route, e.g. `runs.start`, `inbox.push`, or `unknown`. */
  route: string;
  /** Who the matched route lets in: its verifier's name (`caller`, ...); absent for no route. */
  auth?: string;
  /** The workspace the route addresses, if any. */
  workspaceId?: string;
  /** Set when the request's Bearer token is a live run token. */
  runToken?: RunTokenGrant;
  /** The request's credential, already read; a run token's scope already decided. */
  credential: Credential;
}

/**
 * Replaces the default gate. Return true to let the request through, false for 401; throw an
 * `HttpProblem` for any other answer. A live run token presented for its own workspace's Inbox
 * push is accepted by the core before the hook is asked.
 */
export type Authorize = (request: Request, context: AuthContext) => boolean | Promise<boolean>;

export interface GateOptions {
  /** Compared in constant time; at least 32 characters. Absent: non-local callers always get 401. */
  adminToken?: string;
  /** Extra Host names accepted (behind a TLS proxy). */
  publicHosts?: string[];
  /**
   * `trusted`: a local caller (docs/security.md) needs no credential, as the spec says. `token`:
   * everyone needs the admin token: on a host shared with other users, or behind a proxy on it.
   * @default "trusted"
   */
  localCallers?: 'trusted' | 'token';
}

/** The shortest admin token accepted: 32 characters (`openssl rand -base64 32` gives 44). */
export const ADMIN_TOKEN_MIN = 32;

/** Refuses an admin token too short to withstand guessing. */
export function checkAdminToken(token: string | undefined): void {
  if (token !== undefined && token.length < ADMIN_TOKEN_MIN) {
    throw new Error(`the admin token must be at least ${ADMIN_TOKEN_MIN} characters (it has ${token.length}); make one with: openssl rand -base64 32`);
  }
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
  return /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(authority)?.[1]?.toLowerCase();
}

/** An Origin's port (its scheme's default when it names none) is the Host's: another port on the same host is another origin. */
function samePort(scheme: string, originAuthority: string, hostAuthority: string): boolean {
  const port = (authority: string) => /:(\d{1,5})$/.exec(authority)?.[1];
  const origin = port(originAuthority) ?? (scheme.toLowerCase() === 'https' ? '443' : '80');
  // A Host without a port was sent for the scheme's default port, which is the Origin's then.
  return (port(hostAuthority.trim()) ?? origin) === origin;
}

function boundName(address: string | undefined): string | undefined {
  if (!address) return undefined;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return isIP(plain) === 6 ? `[${plain.toLowerCase()}]` : plain.toLowerCase();
}

const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/** 401; a wrong token and a missing one look the same. */
export function unauthorized(): HttpProblem {
  return new HttpProblem('unauthorized', 'Valid credentials are required.', { headers: { 'www-authenticate': 'Bearer' } });
}

/**
 * The default gate (docs/security.md), in its order: Host allow-list (DNS rebinding), Origin and
 * Sec-Fetch-Site (browser pages), then credentials. Local means a loopback peer, no forwarding
 * header (a same-host proxy must not make the internet local) and a loopback Host.
 */
export function createDefaultGate(options: GateOptions): Authorize {
  checkAdminToken(options.adminToken);
  const publicHosts = new Set((options.publicHosts ?? []).map((h) => h.toLowerCase()));
  const isAdminToken = options.adminToken === undefined ? () => false : secretMatcher(options.adminToken);
  const trustLocal = (options.localCallers ?? 'trusted') === 'trusted';
  const failures = new FailedAttempts();

  return (request, context) => {
    const accepted = (name: string | undefined) =>
      name !== undefined && (LOCAL_NAMES.has(name) || publicHosts.has(name) || name === boundName(context.localAddress));

    const host = request.headers.get('host') ?? '';
    const name = host ? hostName(host.trim()) : undefined;
    if (!accepted(name)) throw new HttpProblem('forbidden', 'The Host header is not one this service answers to.');

    const origin = request.headers.get('origin');
    if (origin !== null) {
      const [, scheme, authority] = /^(https?):\/\/([^/]+)$/i.exec(origin.trim()) ?? [];
      if (scheme === undefined || authority === undefined || !accepted(hostName(authority)) || !samePort(scheme, authority, host))
        throw new HttpProblem('forbidden', 'Cross-origin requests are refused.');
    }
    const site = request.headers.get('sec-fetch-site');
    if (site !== null && site !== 'none' && site !== 'same-origin') {
      throw new HttpProblem('forbidden', 'Cross-site requests are refused.');
    }

    const { credential } = context;
    if (credential.kind === 'run' && credential.inScope) return true;
    const direct = FORWARDING_HEADERS.every((h) => !request.headers.has(h)) && name !== undefined && LOCAL_NAMES.has(name);
    // A sandboxed agent's connection, forwarded by its egress proxy, is never a local caller: a
    // sandbox would otherwise start an unconfined run (docs/security.md).
    const local =
      direct && !forwardedForRun(context.remoteAddress, context.remotePort) && (context.unixSocket === true || isLoopbackAddress(context.remoteAddress));
    if (credential.kind === 'bearer' || credential.kind === 'malformed') {
      // A remote peer that keeps guessing is refused for a while, its right guess included. A
      // local process is not throttled: every local caller shares one address, so a few bad
      // guesses by one (an agent) would lock out the operator, and a 32-character token cannot
      // be guessed faster by a local caller than by a remote one.
      if (!local) failures.check(context.remoteAddress);
      if (credential.kind === 'bearer' && isAdminToken(credential.digest)) return true;
      if (!local) failures.record(context.remoteAddress);
    }
    if (credential.kind !== 'none') throw unauthorized();

    // A socket file's callers are the ones its mode lets in, whatever localCallers says.
    if (context.unixSocket) return direct;
    return trustLocal && local;
  };
}
