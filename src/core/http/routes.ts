// whatwg-node's Response: on node:http its string bodies skip the web-stream machinery.
import { Response } from '@whatwg-node/fetch';
import type { Credential } from './auth';
import { readEmptyBody, readJsonObject } from './body';
import type { IdempotencyKeys, StoredAnswer } from '../idempotency';
import type { Inbox } from '../inbox';
import { HttpProblem, type ProblemCode, problemBody, problemHeaders } from '../../contract/problems';
import type { RunService } from '../runs/run-service';
import type { WorkspaceReport } from '../agents/doctor';
import { ANSWERS } from '../../contract/answers';
import { eventStreamResponse } from './event-stream';
import { statusPage, statusPageScript } from './status-page';
import { type RouteDoc, openApiDocument } from './openapi';
import type { RunEvents } from '../events/run-events';
import {
  AgentsQuery,
  EventsQuery,
  InboxPush,
  InboxQuery,
  ListQuery,
  OutputQuery,
  StartBody,
  parseAgentsQuery,
  parseEventsQuery,
  parseInboxPush,
  parseInboxQuery,
  parseListQuery,
  parseOutputQuery,
  parseStartBody,
} from '../../contract/requests';
import type { SessionBook } from '../sessions';
import type { Workspace } from '../types';
import { createClient } from '../../client/index';
import { version } from '../../../package.json';

/** The HTTP routes of the API: each path, its method and its handler, in one table. */

/** What a route's handler works with. */
export interface RouteServices {
  runs: RunService;
  events: RunEvents;
  /** How often an idle event stream sends a keep-alive. */
  heartbeatMs: number;
  sessions: SessionBook;
  inbox: Inbox;
  /** The workspace of a path or query id; 404 workspace_not_found if there is none. */
  workspace(id: string): Promise<Workspace>;
  idempotency: IdempotencyKeys;
  /** The listed workspaces (none when they come from a resolver). */
  workspaces(): Array<Pick<Workspace, 'id' | 'tag'>>;
  /** The agent checks of one workspace, or of every listed one. */
  diagnose(workspaceId: string | undefined): Promise<WorkspaceReport[]>;
}

/** One request, as a handler sees it: `params` typed by the route's path. */
export interface RouteContext<P> {
  request: Request;
  url: URL;
  params: P;
  /** The path the handler is mounted under, without a trailing slash (`""` at the root). */
  basePath: string;
  /** The base URL runs are given as `HEADLESS_API_URL`. */
  apiUrl: string;
  credential: Credential;
  services: RouteServices;
  /** Answers another request in-process, as if it came from the same peer. */
  dispatch(url: string, init: RequestInit): Promise<Response>;
}

/** `/a/:x/b/:y` → `"x" | "y"`. */
type ParamNames<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : Path extends `${string}:${infer Name}`
    ? Name
    : never;

export interface Route {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  segments: string[];
  /** What the OpenAPI document says of it. */
  doc: RouteDoc;
  handle(context: RouteContext<Record<string, string>>): Promise<Response>;
}

function route<Path extends string>(
  name: string,
  method: Route['method'],
  path: Path,
  doc: RouteDoc,
  handle: (context: RouteContext<Record<ParamNames<Path>, string>>) => Promise<Response>,
): Route {
  return { name, method, path, segments: path.slice(1).split('/'), doc, handle: handle as Route['handle'] };
}

const SESSION_PROBLEMS: ProblemCode[] = ['session_not_found'];

/** An answer as a JSON response; a content type of its own (problem JSON) wins. */
const answer = (a: StoredAnswer, extra: Record<string, string> = {}) =>
  new Response(JSON.stringify(a.body), { status: a.status, headers: { 'content-type': 'application/json', ...a.headers, ...extra } });

const json = (body: unknown, status = 200) => answer({ status, body, headers: {} });

let openApi: Record<string, unknown> | undefined;

export const ROUTES: Route[] = [
  route(
    'runs.start',
    'POST',
    '/api/workspaces/:workspaceId/headless',
    {
      summary: 'Start a run',
      body: StartBody,
      headers: [{ name: 'Idempotency-Key', description: '1–255 printable ASCII characters: a retry with the same body gets the first answer.' }],
      responses: {
        202: { description: 'Started (async); Location names the run.', schema: ANSWERS.StartAccepted },
        200: { description: 'Ended (sync, `wait: true`).', schema: ANSWERS.SyncResult },
      },
      problems: [
        'invalid_body', 'prompt_required', 'prompt_too_long', 'invalid_timeout', 'invalid_resume_id', 'agent_unknown', 'agent_not_headless',
        'agent_disabled', 'no_headless_agent', 'resume_requires_async', 'invalid_idempotency_key', 'invalid_webhook', 'webhook_not_allowed',
        'workspace_not_found', 'session_not_found', 'session_other_workspace', 'session_busy', 'session_retired', 'session_not_resumable',
        'idempotency_key_in_use', 'body_too_large', 'unsupported_media_type', 'idempotency_key_reused', 'capacity_reached', 'spawn_failed', 'shutting_down',
      ],
    },
    async ({ request, params, services, apiUrl, basePath }) => {
    const body = await readJsonObject(request);
    const start = parseStartBody(body);
    const location = (taskId: string) => ({ location: `${basePath}/api/headless/${encodeURIComponent(taskId)}` });
    const execute = async (taskId?: string): Promise<StoredAnswer> => {
      const workspace = await services.workspace(params.workspaceId);
      const { record, done } = await services.runs.start(workspace, start, apiUrl, taskId);
      if (!start.wait) return { status: 202, body: { taskId: record.taskId, resumeId: record.resumeId, status: record.status }, headers: location(record.taskId) };
      const result = await done;
      return { status: 200, body: { ...result.record, output: result.output }, headers: {} };
    };
    // The answer a request cut off before it was answered would have had, from its run.
    const replay = async (taskId: string): Promise<StoredAnswer | undefined> => {
      const result = await services.runs.result(taskId);
      if (!result) return undefined;
      const { record, output } = result;
      if (record.mode === 'async') return { status: 202, body: { taskId, resumeId: record.resumeId, status: record.status }, headers: location(taskId) };
      if (record.status !== 'running') return { status: 200, body: { ...record, output: output ?? { stdout: '', stderr: '', truncated: false } }, headers: {} };
      const still = new HttpProblem('idempotency_key_in_use', `The run this Idempotency-Key started, "${taskId}", has not ended yet; retry once it has.`, { extra: { taskId } });
      return { status: still.status, body: problemBody(still), headers: { ...problemHeaders(still), ...location(taskId) } };
    };
    const key = request.headers.get('idempotency-key');
    if (key === null) return answer(await execute());
    const { answer: first, replayed } = await services.idempotency.run(params.workspaceId, key, body, execute, replay);
    return answer(first, replayed ? { 'idempotent-replayed': 'true' } : {});
  }),
  route(
    'runs.list',
    'GET',
    '/api/headless',
    { summary: 'List the runs of a workspace, newest first', query: ListQuery, responses: { 200: { description: 'A page.', schema: ANSWERS.RunList } }, problems: ['invalid_body', 'workspace_not_found'] },
    async ({ url, services }) => {
    const query = parseListQuery(url);
    await services.workspace(query.wsId);
    return json(await services.runs.list(query.wsId, query.status, query.limit, query.cursor));
  }),
  route(
    'runs.get',
    'GET',
    '/api/headless/:taskId',
    { summary: 'Read a run', responses: { 200: { description: 'The run record.', schema: ANSWERS.RunRecord } }, problems: ['run_not_found'] },
    async ({ params, services }) => json(await services.runs.get(params.taskId)),
  ),
  route(
    'runs.output',
    'GET',
    '/api/headless/:taskId/output',
    { summary: "The tail of a run's output", query: OutputQuery, responses: { 200: { description: 'The last bytes of stdout and stderr.', schema: ANSWERS.RunOutput } }, problems: ['invalid_body', 'run_not_found'] },
    async ({ url, params, services }) => json(await services.runs.output(params.taskId, parseOutputQuery(url).tail)),
  ),
  route(
    'runs.events',
    'GET',
    '/api/headless/:taskId/events',
    {
      summary: "A run's events: Server-Sent Events, JSON lines (Accept: application/x-ndjson) or a page (format=json)",
      query: EventsQuery,
      headers: [{ name: 'Last-Event-ID', description: 'Replay the events after this sequence number (wins over `after`).' }],
      responses: {
        200: { description: 'With `format=json`: a page. Otherwise a stream of RunEvent, as SSE or one JSON object per line.', schema: ANSWERS.EventPage, stream: ANSWERS.RunEvent },
      },
      problems: ['invalid_body', 'run_not_found'],
    },
    async ({ request, url, params, services }) => {
    const query = parseEventsQuery(url, request.headers.get('last-event-id'));
    const record = await services.runs.get(params.taskId);
    const { taskId } = record;
    if (query.page) {
      const page = await services.events.page(record, query.after, query.limit);
      const last = page.events.at(-1)?.seq ?? query.after;
      return json({ taskId, events: page.events, ended: page.ended, nextAfter: page.ended ? null : last });
    }
    const ndjson = (request.headers.get('accept') ?? '').includes('application/x-ndjson');
    return eventStreamResponse(services.events.reader(record, query.after), ndjson ? 'ndjson' : 'sse', services.heartbeatMs);
  }),
  route(
    'runs.cancel',
    'POST',
    '/api/headless/:taskId/cancel',
    { summary: 'Cancel a running run', responses: { 202: { description: 'Stopping; the record.', schema: ANSWERS.RunRecord } }, problems: ['run_not_found', 'run_not_running', 'run_owner_unreachable', 'invalid_body', 'unsupported_media_type'] },
    async ({ request, params, services }) => {
    await readEmptyBody(request);
    return json(await services.runs.cancel(params.taskId), 202);
  }),
  route(
    'sessions.get',
    'GET',
    '/api/sessions/:resumeId',
    { summary: 'Read a Session', responses: { 200: { description: 'The Session.', schema: ANSWERS.SessionView } }, problems: SESSION_PROBLEMS },
    async ({ params, services }) => json(await services.sessions.view(await services.sessions.require(params.resumeId))),
  ),
  route(
    'sessions.retire',
    'POST',
    '/api/sessions/:resumeId/retire',
    { summary: 'Retire a Session', responses: { 200: { description: 'The retired Session.', schema: ANSWERS.SessionView } }, problems: [...SESSION_PROBLEMS, 'session_busy', 'invalid_body', 'unsupported_media_type'] },
    async ({ request, params, services }) => {
    await readEmptyBody(request);
    return json(await services.sessions.retire(params.resumeId));
  }),
  route(
    'inbox.push',
    'POST',
    '/api/workspaces/:workspaceId/inbox',
    { summary: 'Push an Inbox item (a run token may)', body: InboxPush, responses: { 201: { description: 'The item.', schema: ANSWERS.InboxItem } }, problems: ['invalid_body', 'workspace_not_found', 'body_too_large', 'unsupported_media_type'] },
    async ({ request, params, services, credential }) => {
    const item = parseInboxPush(await readJsonObject(request));
    const workspace = await services.workspace(params.workspaceId);
    const grant = credential.kind === 'run' ? credential.grant : undefined;
    return json(await services.inbox.push(workspace.id, item, grant), 201);
  }),
  route(
    'inbox.list',
    'GET',
    '/api/workspaces/:workspaceId/inbox',
    { summary: 'List the Inbox, newest first', query: InboxQuery, responses: { 200: { description: 'A page.', schema: ANSWERS.InboxList } }, problems: ['invalid_body', 'workspace_not_found'] },
    async ({ url, params, services }) => {
    const workspace = await services.workspace(params.workspaceId);
    const query = parseInboxQuery(url);
    return json(await services.inbox.list(workspace.id, query.unread, query.limit, query.cursor));
  }),
  route(
    'agents.check',
    'GET',
    '/api/agents',
    { summary: "Check each workspace's agents (as `doctor` does)", query: AgentsQuery, responses: { 200: { description: 'The checks.', schema: ANSWERS.AgentsReport } }, problems: ['invalid_body', 'workspace_not_found'] },
    async ({ url, services }) => {
    const query = parseAgentsQuery(url);
    return json({ workspaces: await services.diagnose(query.wsId) });
  }),
  route(
    'workspaces.list',
    'GET',
    '/api/workspaces',
    { summary: 'The listed workspaces (ids and tags; none when they come from a resolver)', responses: { 200: { description: 'The workspaces.', schema: ANSWERS.WorkspaceList } }, problems: [] },
    async ({ services }) => json({ workspaces: services.workspaces() }),
  ),
  route('page', 'GET', '/', { summary: 'The status page (HTML)', responses: { 200: { description: 'text/html' } }, problems: [] }, async () => statusPage()),
  route('page.script', 'GET', '/app.js', { summary: "The status page's script", responses: { 200: { description: 'text/javascript' } }, problems: [] }, async () => statusPageScript()),
  route(
    'mcp',
    'POST',
    '/mcp',
    { summary: 'The API as MCP tools (Streamable HTTP, stateless, JSON answers)', responses: { 200: { description: 'A JSON-RPC answer.' }, 202: { description: 'A notification, taken.' } }, problems: [] },
    async ({ request, apiUrl, dispatch }) => {
      // Each tool call is a request to this handler, with this request's Host and credential:
      // the gate decides it exactly as it would a direct call.
      const forward = (input: string | URL | Request, init: RequestInit = {}) => {
        const headers = new Headers(init.headers);
        for (const name of ['host', 'authorization']) {
          const value = request.headers.get(name);
          if (value !== null) headers.set(name, value);
        }
        return dispatch(String(input), { ...init, headers });
      };
      const { answerMcp } = await import('../../mcp/server');
      return answerMcp(request, createClient({ url: apiUrl, fetch: forward as typeof fetch }));
    },
  ),
  route(
    'openapi',
    'GET',
    '/openapi.json',
    { summary: 'This document', responses: { 200: { description: 'OpenAPI 3.1.' } }, problems: [] },
    async () => json((openApi ??= openApiDocument(ROUTES, version))),
  ),
  route(
    'inbox.read',
    'POST',
    '/api/workspaces/:workspaceId/inbox/:itemId/read',
    { summary: 'Mark an Inbox item read', responses: { 200: { description: 'The item.', schema: ANSWERS.InboxItem } }, problems: ['workspace_not_found', 'inbox_item_not_found', 'invalid_body', 'unsupported_media_type'] },
    async ({ request, params, services }) => {
    await readEmptyBody(request);
    const workspace = await services.workspace(params.workspaceId);
    return json(await services.inbox.markRead(workspace.id, params.itemId));
  }),
];

export interface RouteMatch {
  route: Route;
  params: Record<string, string>;
}

function segmentsOf(pathname: string, basePath: string): string[] | undefined {
  if (basePath && pathname !== basePath && !pathname.startsWith(`${basePath}/`)) return undefined;
  const rest = pathname.slice(basePath.length);
  if (!rest.startsWith('/')) return undefined;
  try {
    // Most paths have nothing escaped: decoding is skipped for those (it is a cost on every request).
    return rest.slice(1).split('/').map((segment) => (segment.includes('%') ? decodeURIComponent(segment) : segment));
  } catch {
    return undefined;
  }
}

/**
 * The route for a request, matched on decoded path segments below `basePath`; or the problem
 * to answer (404 `not_found`, 405 `method_not_allowed`), which is answered after the gate.
 */
export function matchRoute(method: string, pathname: string, basePath: string): RouteMatch | HttpProblem {
  const segments = segmentsOf(pathname, basePath);
  const allowed: string[] = [];
  for (const candidate of segments ? ROUTES : []) {
    if (candidate.segments.length !== segments!.length) continue;
    const params: Record<string, string> = {};
    const fits = candidate.segments.every((part, i) => {
      const segment = segments![i]!;
      if (!part.startsWith(':')) return part === segment;
      params[part.slice(1)] = segment;
      return segment !== '';
    });
    if (!fits) continue;
    if (candidate.method === method) return { route: candidate, params };
    allowed.push(candidate.method);
  }
  if (allowed.length > 0) {
    return new HttpProblem('method_not_allowed', `Use ${allowed.join(' or ')} on this path.`, { headers: { allow: allowed.join(', ') } });
  }
  return new HttpProblem('not_found', 'No such route.');
}
