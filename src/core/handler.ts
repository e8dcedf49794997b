import { isAbsolute } from 'node:path';
import { type ServerAdapter, type ServerAdapterBaseObject, createServerAdapter } from '@whatwg-node/server';
import type { Keyv } from 'keyv';
import { diagnoseWorkspace } from './agents/doctor';
import { AgentRegistry } from './agents/registry';
import type { CommandAgentDefinition } from './agents/command-agent';
import type { AgentAdapter } from './agents/types';
import { type AuthContext, type Authorize, type Credential, createDefaultGate, readCredential, unauthorized } from './http/auth';
import { isValidId } from '../contract/ids';
import { createFleet } from './fleet/fleet';
import { IdempotencyKeys } from './idempotency';
import { Inbox } from './inbox';
import { HttpProblem } from '../contract/problems';
import { errorToResponse } from './http/problem-response';
import { type RouteMatch, type RouteServices, matchRoute } from './http/routes';
import { Retention } from './retention';
import { RunEvents } from './events/run-events';
import { type WebhookOptions, Webhooks } from './delivery/webhooks';
import { RunTokens } from './runs/tokens';
import { RunService } from './runs/run-service';
import { RunRecords } from './runs/records';
import { SessionBook } from './sessions';
import { type Spawner, createExecaSpawner } from './process/spawner';
import { type HeadlessStore, createMemoryKeyv, keyvStore } from './store/keyv-store';
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
  /** Replaces the default gate (README: Security model). @default the loopback/admin-token gate */
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
  /** Completion webhooks: the signing secret, per-start URLs, private targets, retries (README: Webhooks). @default none */
  webhooks?: WebhookOptions;
  /** Ended runs, Inbox items and expired idempotency keys older than this many days are deleted, hourly; 0 keeps everything. @default 30 */
  retentionDays?: number;
  /**
   * With a PostgreSQL store shared by several instances: how long an instance's lease lasts; its
   * runs are taken over this long after it dies (README: Running several instances). @default 15000
   */
  instanceLeaseMs?: number;
  /** How often an idle event stream sends a keep-alive (README: Run events). @default 15000 */
  heartbeatMs?: number;
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
  /** Where the handler reports unexpected errors (the `log` option); adapters report theirs here too. */
  log: (message: string, error?: unknown) => void;
};

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
  const fleet = createFleet(store, { leaseMs: options.instanceLeaseMs, log });
  const sessions = new SessionBook(store, fleet, (agent) => registry.get(agent)?.supportsResume ?? false, log);
  const inbox = new Inbox(store);
  const events = new RunEvents({ store, log });
  const records = new RunRecords({ store, log });
  const webhooks = new Webhooks({
    ...options.webhooks,
    records,
    instanceId: fleet.instanceId,
    log,
    workspace: async (id) => (isValidId(id) ? resolveWorkspace(id) : undefined),
  });
  for (const ws of workspaceList?.values() ?? []) webhooks.checkWorkspace(ws);
  const runs = new RunService({
    store,
    registry,
    sessions,
    tokens,
    spawner: options.spawner ?? createExecaSpawner(),
    events,
    webhooks,
    fleet,
    records,
    maxConcurrentRuns: options.maxConcurrentRuns ?? 4,
    defaultAgent: options.defaultAgent,
    adminToken: options.adminToken,
    baseEnv: env,
    log,
  });
  const retentionDays = options.retentionDays ?? 30;
  if (!Number.isFinite(retentionDays) || retentionDays < 0) throw new Error(`retentionDays must be a number of days, 0 or more, not ${retentionDays}`);
  const idempotency = new IdempotencyKeys(store, fleet, log);
  const retention = new Retention({ days: retentionDays, records, events, inbox, idempotency, log });
  const gate = options.authorize ?? createDefaultGate({ adminToken: options.adminToken, publicHosts: options.publicHosts });
  const ready = (async () => {
    await inbox.load();
    await runs.load();
    await fleet.join({
      async takeOver(isGone) {
        await runs.takeOver(isGone);
        await webhooks.takeOver(isGone);
      },
      answer: (request) => runs.answer(request),
      lost: () => runs.abandon(),
    });
    retention.start();
  })();
  ready.catch(() => undefined);

  const services: RouteServices = {
    runs,
    events,
    heartbeatMs: options.heartbeatMs ?? 15_000,
    sessions,
    inbox,
    idempotency,
    workspaces: () => [...(workspaceList?.values() ?? [])].map((ws) => ({ id: ws.id, ...(ws.tag === undefined ? {} : { tag: ws.tag }) })),
    async workspace(id) {
      const ws = isValidId(id) ? await resolveWorkspace(id) : undefined;
      // In a fleet the workspace may be configured on other instances: say where the answer comes from.
      if (!ws) throw new HttpProblem('workspace_not_found', fleet.shared ? `No workspace "${id}" on this instance.` : `No workspace "${id}".`);
      return ws;
    },
    async diagnose(workspaceId) {
      if (workspaceId === undefined && !workspaceList) {
        throw new HttpProblem('invalid_body', 'Query parameter "wsId" is required: workspaces come from a resolver.');
      }
      const targets = workspaceId === undefined ? [...workspaceList!.values()] : [await services.workspace(workspaceId)];
      return Promise.all(targets.map((workspace) => diagnoseWorkspace({ registry, workspace, baseEnv: env, defaultAgent: options.defaultAgent })));
    },
  };

  /** The gate, asked once per request; a run token's rule was decided with the credential. */
  async function authorize(request: Request, match: RouteMatch | undefined, ctx: HeadlessServerContext, credential: Credential): Promise<void> {
    const context: AuthContext = {
      remoteAddress: ctx.remoteAddress,
      localAddress: ctx.localAddress,
      route: match?.route.name ?? 'unknown',
      workspaceId: match?.params.workspaceId,
      runToken: credential.kind === 'run' ? credential.grant : undefined,
      credential,
    };
    // A custom hook is never asked about run tokens: the core's rule is the only one.
    if (options.authorize && credential.kind === 'run') {
      if (credential.inScope) return;
      throw unauthorized();
    }
    if (!(await gate(request, context))) throw unauthorized();
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
      const basePath = (ctx.mountPath ?? options.basePath ?? '').replace(/\/+$/, '');
      const match = matchRoute(request.method, url.pathname, basePath);
      const found = match instanceof HttpProblem ? undefined : match;
      const credential = readCredential(request, tokens, found?.route.name ?? 'unknown', found?.params.workspaceId);
      await authorize(request, found, ctx, credential);
      if (!found) throw match;
      return await found.route.handle({
        request,
        url,
        params: found.params,
        basePath,
        apiUrl: options.apiUrl ?? `${url.origin}${basePath}`,
        credential,
        services,
        dispatch: (target, init) => Promise.resolve(adapter.fetch(target, init, ctx)),
      });
    } catch (error) {
      return errorToResponse(error, log);
    }
  }

  const adapter = createServerAdapter<HeadlessServerContext>(handle);
  let closing: Promise<void> | undefined;
  return Object.assign(adapter, {
    ready,
    log,
    close: () => {
      closing ??= (async () => {
        await ready.catch(() => undefined);
        await retention.close();
        await runs.shutdown();
        await webhooks.close();
        await fleet.leave();
        await store.close();
      })();
      return closing;
    },
  }) as HeadlessHandler;
}
