// whatwg-node's Response: on node:http its string bodies skip the web-stream machinery.
import { Response } from '@whatwg-node/fetch';
import { isAbsolute } from 'node:path';
import { type ServerAdapter, type ServerAdapterBaseObject, createServerAdapter } from '@whatwg-node/server';
import type { Keyv } from 'keyv';
import { AgentRegistry } from './agents/registry';
import type { CommandAgentDefinition } from './agents/command-agent';
import type { AgentAdapter } from './agents/types';
import { type AuthContext, type Authorize, bearerToken, createDefaultGate, unauthorized } from './auth';
import { readEmptyBody, readJsonObject } from './body';
import { isValidId } from './ids';
import { Inbox } from './inbox';
import { HttpProblem, errorToResponse } from './problem';
import { type RouteMatch, matchRoute } from './routes';
import { type RunTokenGrant, RunTokens } from './run-tokens';
import { RunService } from './runs';
import { parseInboxPush, parseInboxQuery, parseListQuery, parseStartBody } from './schemas';
import { SessionBook } from './sessions';
import { type Spawner, createExecaSpawner } from './spawner';
import { type HeadlessStore, createMemoryKeyv, keyvStore } from './store';
import type { Workspace } from './types';

export type WorkspaceResolver = (id: string) => Workspace | undefined | Promise<Workspace | undefined>;

export interface HeadlessHandlerOptions {
  /** The workspaces runs may target: a list, or a resolver called with a validated id. */
  workspaces: Workspace[] | WorkspaceResolver;
  /** Custom agents, beside the built-ins: config-style command agents or full adapters. @default {} */
  agents?: Record<string, CommandAgentDefinition | AgentAdapter>;
  /** Where runs, Sessions and the Inbox live. @default an in-memory Keyv */
  store?: Keyv;
  /** Starts agent processes. @default createExecaSpawner() */
  spawner?: Spawner;
  /** Replaces the default gate of contract §6. @default the loopback/admin-token gate */
  authorize?: Authorize;
  /** Admin token for non-local callers (default gate only). Never shown to runs. @default none */
  adminToken?: string;
  /** Runs allowed at once on this host, sync runs included. @default 4 */
  maxConcurrentRuns?: number;
  /** The installation default agent. @default none */
  defaultAgent?: string;
  /** Extra Host names accepted by the default gate (behind a TLS proxy). @default [] */
  publicHosts?: string[];
  /** Path prefix the handler is mounted under, e.g. `/agents`. @default "" */
  basePath?: string;
  /** Base URL given to runs as `HEADLESS_API_URL`. @default the request's origin plus the mount path */
  apiUrl?: string;
  /** Environment runs start from. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Where unexpected errors are reported. @default console.error */
  log?: (message: string, error?: unknown) => void;
}

/** What adapters pass with each request. */
export interface HeadlessServerContext {
  /** The TCP peer address; absent means "not local". */
  remoteAddress?: string;
  /** The address the server socket is bound to. */
  localAddress?: string;
  /** Path the host framework mounted the handler under (Express `req.baseUrl`). */
  mountPath?: string;
}

export type HeadlessHandler = ServerAdapter<HeadlessServerContext, ServerAdapterBaseObject<HeadlessServerContext>> & {
  /** Settles when the store is loaded and crash recovery is done; rejects if that failed. */
  ready: Promise<void>;
  /** Graceful shutdown: refuse new starts, stop running runs (recorded `interrupted`), close the store. */
  close(): Promise<void>;
};

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { ...headers, 'content-type': 'application/json' } });

function defaultLog(message: string, error?: unknown) {
  console.error(`[headless-run-webhook] ${message}${error instanceof Error ? `: ${error.message}` : ''}`);
}

function validateWorkspaces(list: Workspace[]): Map<string, Workspace> {
  const map = new Map<string, Workspace>();
  for (const ws of list) {
    if (!isValidId(ws.id)) throw new Error(`workspace id "${ws.id}" must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`);
    if (map.has(ws.id)) throw new Error(`workspace id "${ws.id}" is listed twice`);
    if (!isAbsolute(ws.path)) throw new Error(`workspace "${ws.id}" needs an absolute path, not "${ws.path}"`);
    map.set(ws.id, ws);
  }
  return map;
}

/**
 * The headless-run API as a fetch-style handler: `(Request, context?) => Promise<Response>`,
 * also usable as a node:http listener or Express middleware through the adapters.
 *
 * @example
 * const handler = createHeadlessHandler({ workspaces: [{ id: 'demo', path: '/srv/demo' }] });
 * const res = await handler.fetch('http://localhost/api/headless?wsId=demo', { headers: { host: 'localhost' } }, { remoteAddress: '127.0.0.1' });
 */
export function createHeadlessHandler(options: HeadlessHandlerOptions): HeadlessHandler {
  const log = options.log ?? defaultLog;
  const env = options.env ?? process.env;
  const registry = new AgentRegistry(options.agents);
  const workspaceList = Array.isArray(options.workspaces) ? validateWorkspaces(options.workspaces) : undefined;
  const resolveWorkspace = workspaceList ? (id: string) => workspaceList.get(id) : (options.workspaces as WorkspaceResolver);
  const store: HeadlessStore = keyvStore(options.store ?? createMemoryKeyv());
  const tokens = new RunTokens();
  const sessions = new SessionBook(store, (agent) => registry.get(agent)?.supportsResume ?? false);
  const inbox = new Inbox(store);
  const runs = new RunService({
    store,
    registry,
    sessions,
    tokens,
    spawner: options.spawner ?? createExecaSpawner(),
    maxConcurrentRuns: options.maxConcurrentRuns ?? 4,
    defaultAgent: options.defaultAgent,
    adminToken: options.adminToken,
    baseEnv: env,
    log,
  });
  const gate = options.authorize ?? createDefaultGate({ adminToken: options.adminToken, publicHosts: options.publicHosts });
  const ready = (async () => {
    await inbox.load();
    await runs.load();
  })();
  ready.catch(() => undefined);

  async function workspace(id: string): Promise<Workspace> {
    const ws = isValidId(id) ? await resolveWorkspace(id) : undefined;
    if (!ws) throw new HttpProblem('workspace_not_found', `No workspace "${id}".`);
    return ws;
  }

  async function authorize(request: Request, route: RouteMatch | undefined, ctx: HeadlessServerContext, grant: RunTokenGrant | undefined): Promise<void> {
    const context: AuthContext = {
      remoteAddress: ctx.remoteAddress,
      localAddress: ctx.localAddress,
      route: route?.name ?? 'unknown',
      workspaceId: route?.params.workspaceId,
      runToken: grant,
    };
    if (options.authorize && grant) {
      if (context.route === 'inbox.push' && grant.workspaceId === context.workspaceId) return;
      throw unauthorized();
    }
    if (!(await gate(request, context))) throw unauthorized();
  }

  async function route(request: Request, url: URL, match: RouteMatch, apiUrl: string, grant: RunTokenGrant | undefined): Promise<Response> {
    const p = match.params;
    switch (match.name) {
      case 'runs.start': {
        const start = parseStartBody(await readJsonObject(request));
        const ws = await workspace(p.workspaceId!);
        const { record, done } = await runs.start(ws, start, apiUrl);
        if (!start.wait) return json({ taskId: record.taskId, resumeId: record.resumeId, status: record.status }, 202, { location: `/api/headless/${record.taskId}` });
        const result = await done;
        return json({ ...result.record, output: result.output });
      }
      case 'runs.list': {
        const q = parseListQuery(url);
        await workspace(q.wsId);
        return json(await runs.list(q.wsId, q.status, q.limit, q.cursor));
      }
      case 'runs.get':
        return json(await runs.get(p.taskId!));
      case 'runs.cancel':
        await readEmptyBody(request);
        return json(await runs.cancel(p.taskId!), 202);
      case 'sessions.get':
        return json(sessions.view(await sessions.require(p.resumeId!)));
      case 'sessions.retire':
        await readEmptyBody(request);
        return json(await sessions.retire(p.resumeId!));
      case 'inbox.push': {
        const item = parseInboxPush(await readJsonObject(request));
        await workspace(p.workspaceId!);
        return json(await inbox.push(p.workspaceId!, item, grant), 201);
      }
      case 'inbox.list': {
        const ws = await workspace(p.workspaceId!);
        const q = parseInboxQuery(url);
        return json(await inbox.list(ws.id, q.unread, q.limit, q.cursor));
      }
      case 'inbox.read':
        await readEmptyBody(request);
        await workspace(p.workspaceId!);
        return json(await inbox.markRead(p.workspaceId!, p.itemId!));
    }
  }

  async function handle(request: Request, ctx: HeadlessServerContext = {}): Promise<Response> {
    try {
      await ready;
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        // Adapters build the URL from the Host header: only a malformed Host makes it unparseable.
        throw new HttpProblem('forbidden', 'The Host header is not one this service answers to.');
      }
      const mountPath = ctx.mountPath ?? options.basePath ?? '';
      const match = matchRoute(request.method, url.pathname, mountPath);
      const routeMatch = 'name' in match ? match : undefined;
      const token = bearerToken(request);
      const grant = token ? tokens.lookup(token) : undefined;
      await authorize(request, routeMatch, ctx, grant);
      if (!routeMatch) throw (match as { problem: HttpProblem }).problem;
      const apiUrl = options.apiUrl ?? `${url.origin}${mountPath.replace(/\/+$/, '')}`;
      return await route(request, url, routeMatch, apiUrl, grant);
    } catch (error) {
      return errorToResponse(error, log);
    }
  }

  const adapter = createServerAdapter<HeadlessServerContext>(handle);
  let closing: Promise<void> | undefined;
  return Object.assign(adapter, {
    ready,
    close: () => {
      closing ??= (async () => {
        await ready.catch(() => undefined);
        await runs.shutdown();
        await store.close();
      })();
      return closing;
    },
  }) as HeadlessHandler;
}
