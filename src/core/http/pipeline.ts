import { Headers, Response } from '@whatwg-node/fetch';
import { createServerAdapter } from '@whatwg-node/server';
import { HttpProblem } from '../../contract/problems';
import type { RunTokens } from '../runs/tokens';
import { type AuthContext, type Authorize, type Credential, type RouteVerifier, readCredential, verifierOf } from './auth';
import { errorToResponse } from './problem-response';
import { type Route, type RouteMatch, type RouteServices, checkParams, matchRoute } from './router';

/** What adapters pass with each request. */
export interface HeadlessServerContext {
  /** The TCP peer address; absent means "not local". */
  remoteAddress?: string;
  /** The address the server socket is bound to. */
  localAddress?: string;
  /** Path the host framework mounted the handler under (Express `req.baseUrl`). */
  mountPath?: string;
  /** It came through a Unix-domain socket: who could connect was decided by the socket file's mode. */
  unixSocket?: boolean;
  /** The TCP peer's port, and ours: with `remoteAddress`, how a local peer's process is found (docs/approvals.md). */
  remotePort?: number;
  localPort?: number;
  /** The accepted Unix-domain socket's descriptor: how its peer's process is found. */
  socketFd?: number;
}

export interface PipelineOptions {
  routes: readonly Route[];
  services: RouteServices;
  tokens: RunTokens;
  gate: Authorize;
  /** The gate is the library user's hook: it is never asked about run tokens. */
  customGate: boolean;
  basePath?: string;
  /** The base URL runs are given, read at each request (the daemon knows it only once it listens). */
  apiUrl(): string | undefined;
  /** Settles when the service may answer. */
  ready: Promise<void>;
  log: (message: string, error?: unknown) => void;
  /** Closes the service: what the adapter's `dispose()` and `await using` do. */
  close(): Promise<void>;
}

/** The context's connection fields that are set: a peer's ports and descriptor. */
const peerFields = ({ remotePort, localPort, socketFd }: HeadlessServerContext) => ({
  ...(remotePort === undefined ? {} : { remotePort }),
  ...(localPort === undefined ? {} : { localPort }),
  ...(socketFd === undefined ? {} : { socketFd }),
});

/** A HEAD answer: a GET's status and headers; its body (a stream, perhaps) is let go. */
function withoutBody(response: Response): Response {
  void response.body?.cancel().catch(() => undefined);
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(null, { status: response.status, headers });
}

/**
 * One request's way through the service: its URL and mount path, the route, the credential,
 * the gate (deciding from what the route declares), the route's handler; anything thrown
 * becomes problem JSON in one place.
 */
export function createPipeline(o: PipelineOptions) {
  /** Runs the verifier the route declares (or the caller gate, for no route); answers what it verified. */
  async function verify(
    request: Request,
    match: RouteMatch | undefined,
    ctx: HeadlessServerContext,
    verifier: RouteVerifier<unknown>,
    credential: Credential,
  ): Promise<unknown> {
    const auth: AuthContext = {
      remoteAddress: ctx.remoteAddress,
      localAddress: ctx.localAddress,
      unixSocket: ctx.unixSocket === true,
      ...peerFields(ctx),
      route: match?.route.name ?? 'unknown',
      ...(match ? { auth: verifier.name } : {}),
      workspaceId: match?.params.workspaceId,
      runToken: credential.kind === 'run' ? credential.grant : undefined,
      credential,
    };
    return verifier.verify(request, { auth, gate: o.gate, customGate: o.customGate, params: match?.params ?? {}, services: o.services });
  }

  async function handle(request: Request, ctx: HeadlessServerContext = {}): Promise<Response> {
    try {
      await o.ready;
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        // Adapters build the URL from the Host header: only a malformed Host makes it unparseable.
        throw new HttpProblem('forbidden', 'The Host header is not one this service answers to.');
      }
      const basePath = (ctx.mountPath ?? o.basePath ?? '').replace(/\/+$/, '');
      // HEAD is answered wherever GET is: the same status and headers, no body.
      const head = request.method === 'HEAD';
      const match = matchRoute(o.routes, head ? 'GET' : request.method, url.pathname, basePath);
      const found = match instanceof HttpProblem ? undefined : match;
      const verifier = verifierOf(found?.route.auth);
      const credential = readCredential(request, o.tokens, verifier, found?.params.workspaceId);
      const verified = await verify(request, found, ctx, verifier, credential);
      if (!found) throw match;
      checkParams(found.params);
      const response = await found.route.handle({
        request,
        url,
        params: found.params,
        basePath,
        apiUrl: o.apiUrl() ?? `${url.origin}${basePath}`,
        credential,
        verified,
        services: o.services,
        dispatch: (target, init) => Promise.resolve(adapter.fetch(target, init, ctx)),
      });
      return head ? withoutBody(response) : response;
    } catch (error) {
      const response = errorToResponse(error, o.log);
      return request.method === 'HEAD' ? withoutBody(response) : response;
    }
  }

  const adapter = createServerAdapter<HeadlessServerContext>(handle, { plugins: [{ onDispose: () => o.close() }] });
  return adapter;
}
