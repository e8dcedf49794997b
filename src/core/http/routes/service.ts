import { ANSWERS } from '../../../contract/answers';
import { AgentsQuery, parseAgentsQuery } from '../../../contract/requests';
import { createClient } from '../../../client/index';
import { type Route, json, route } from '../router';
import { statusPage, statusPageScript } from '../status-page';

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
      name: 'mcp',
      method: 'POST',
      path: '/mcp',
      auth: 'caller or run token',
      doc: {
        summary: 'The API as MCP tools (Streamable HTTP, stateless, JSON answers)',
        responses: { 200: { description: 'A JSON-RPC answer.' }, 202: { description: 'A notification, taken.' } },
        problems: [],
      },
    },
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
      const { answerMcp } = await import('../../../mcp/server');
      return answerMcp(request, createClient({ url: apiUrl, fetch: forward as typeof fetch }));
    },
  ),
];
