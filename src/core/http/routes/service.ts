import { ANSWERS } from '../../../contract/answers';
import { AgentsQuery, parseAgentsQuery } from '../../../contract/requests';
import { createClient } from '../../../client/index';
import { HttpProblem } from '../../../contract/problems';
import { loadOptional } from '../../util/optional-package';
import { readJsonText } from '../body';
import { type Route, json, route } from '../router';

/** Headers of the MCP request itself, never passed on to its tool calls (each has its own body and answer). */
const OWN_HEADERS = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'accept',
  'accept-encoding',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
]);

/** JSON-RPC calls in one MCP batch, at most. */
const MCP_BATCH = 20;
import { statusPage, statusPageIcon, statusPageScript } from '../status-page';

/** The service itself: agent checks, workspaces, the status page, MCP. */
export const SERVICE_ROUTES: Route[] = [
  route(
    {
      name: 'agents.check',
      method: 'GET',
      path: '/api/agents',
      auth: 'caller',
      doc: {
        summary: "Check each workspace's agents (as `doctor` does)",
        query: AgentsQuery,
        responses: { 200: { description: 'The checks.', schema: ANSWERS.AgentsReport } },
        problems: ['invalid_body', 'workspace_not_found'],
      },
    },
    async ({ url, services }) => {
      const query = parseAgentsQuery(url);
      return json({ workspaces: await services.diagnose(query.wsId) });
    },
  ),
  route(
    {
      name: 'workspaces.list',
      method: 'GET',
      path: '/api/workspaces',
      auth: 'caller',
      doc: {
        summary: 'The listed workspaces (ids and tags; none when they come from a resolver)',
        responses: { 200: { description: 'The workspaces.', schema: ANSWERS.WorkspaceList } },
        problems: [],
      },
    },
    async ({ services }) => json({ workspaces: services.workspaces() }),
  ),
  route(
    {
      name: 'page',
      method: 'GET',
      path: '/',
      auth: 'caller',
      doc: { summary: 'The status page (HTML)', responses: { 200: { description: 'text/html' } }, problems: [] },
    },
    async () => statusPage(),
  ),
  route(
    {
      name: 'page.script',
      method: 'GET',
      path: '/app.js',
      auth: 'caller',
      doc: { summary: "The status page's script", responses: { 200: { description: 'text/javascript' } }, problems: [] },
    },
    async () => statusPageScript(),
  ),
  route(
    {
      name: 'page.icon',
      method: 'GET',
      path: '/favicon.ico',
      auth: 'caller',
      doc: { summary: "The status page's icon", responses: { 200: { description: 'image/svg+xml' } }, problems: [] },
    },
    async () => statusPageIcon(),
  ),
  route(
    {
      name: 'mcp',
      method: 'POST',
      path: '/mcp',
      auth: 'caller or run token',
      doc: {
        summary: 'The API as MCP tools (Streamable HTTP, stateless, JSON answers)',
        responses: { 200: { description: 'A JSON-RPC answer.' }, 202: { description: 'A notification, taken.' } },
        problems: ['not_installed'],
      },
    },
    async ({ request, apiUrl, dispatch }) => {
      // Each tool call is a request to this handler, with this request's headers (its Host, its
      // credential, whatever a custom gate reads): the gate decides it exactly as it would a direct call.
      const forward = (input: string | URL | Request, init: RequestInit = {}) => {
        const headers = new Headers(init.headers);
        request.headers.forEach((value, name) => {
          if (!OWN_HEADERS.has(name) && !headers.has(name)) headers.set(name, value);
        });
        return dispatch(String(input), { ...init, headers });
      };
      // The service's own limits before the SDK reads it: 256 KiB, and a batch of at most MCP_BATCH calls.
      const text = await readJsonText(request);
      const batch = batchSize(text);
      if (batch > MCP_BATCH) throw new HttpProblem('invalid_body', `A JSON-RPC batch takes at most ${MCP_BATCH} calls.`);
      const { answerMcp } = await import('../../../mcp/server');
      const checked = new Request(request.url, { method: 'POST', headers: request.headers, body: text });
      return loadOptional(
        () => answerMcp(checked, createClient({ url: apiUrl, fetch: forward as typeof fetch })),
        '@modelcontextprotocol/sdk',
        'MCP over HTTP',
      );
    },
  ),
];

/** The calls in a JSON-RPC body; one where it is not a batch (or not JSON: the SDK answers that). */
function batchSize(text: string): number {
  if (!/^\s*\[/.test(text)) return 1;
  try {
    const calls = JSON.parse(text) as unknown;
    return Array.isArray(calls) ? calls.length : 1;
  } catch {
    return 1;
  }
}
