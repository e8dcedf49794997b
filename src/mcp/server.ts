import { toJsonSchema } from '@valibot/to-json-schema';
import * as v from 'valibot';
import { HeadlessError, type HeadlessClient } from '../client/index';
import { version } from '../../package.json';
import { APPROVAL_STATUSES, RUN_STATUSES } from '../contract/records';
import { InboxPush, MessageBody, StartBody, USAGE_DAYS_MAX } from '../contract/requests';
import { RunSpecEntries } from '../contract/run-spec';

/**
 * The API as MCP tools (docs/mcp.md), over the typed client: the same tools whether served
 * over stdio (`headless-run-webhook mcp`) or mounted by the handler at `/mcp`. Their input
 * schemas are the request schemas' own fields, converted to JSON Schema.
 */

const id = v.pipe(v.string(), v.minLength(1));
const limit = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(500)));

interface Tool<S extends v.GenericSchema> {
  description: string;
  input: S;
  call(client: HeadlessClient, args: v.InferOutput<S>, context: McpContext): Promise<unknown>;
}

const tool = <S extends v.GenericSchema>(t: Tool<S>) => t as unknown as Tool<v.GenericSchema>;

/** What a tool may take from where it is served. */
export interface McpContext {
  /** The workspace of the run this server is inside (stdio, `HEADLESS_WORKSPACE_ID`). */
  workspaceId?: string;
}

const TOOLS: Record<string, Tool<v.GenericSchema>> = {
  start_run: tool({
    description: 'Start a coding-agent run in a workspace. Answers at once with its taskId and resumeId; use wait_run for the end.',
    // Every field of the run spec, as the start body takes it (contract/run-spec.ts).
    input: v.strictObject({ workspaceId: id, prompt: StartBody.entries.prompt, resumeId: StartBody.entries.resumeId, ...RunSpecEntries }),
    call: (client, { workspaceId, ...request }) => client.start(workspaceId, request),
  }),
  get_run_changes: tool({
    description: 'What an ended run in a git worktree (isolation "worktree") changed: its branch, base and head commits, changed files and patch.',
    input: v.strictObject({ taskId: id }),
    call: (client, { taskId }) => client.changes(taskId),
  }),
  get_run: tool({
    description: 'Read a run record: status, exit code, error, usage, last message.',
    input: v.strictObject({ taskId: id }),
    call: (client, { taskId }) => client.get(taskId),
  }),
  list_runs: tool({
    description: "List a workspace's runs, newest first; metadata is one `key:value` pair.",
    input: v.strictObject({
      workspaceId: id,
      status: v.optional(v.picklist(RUN_STATUSES)),
      agent: v.optional(v.string()),
      schedule: v.optional(v.string()),
      trigger: v.optional(v.string()),
      metadata: v.optional(v.string()),
      limit,
      cursor: v.optional(v.string()),
    }),
    call: (client, { workspaceId, ...page }) => client.listPage(workspaceId, page),
  }),
  list_trigger_deliveries: tool({
    description:
      "What became of a trigger's deliveries (a monitor's or forge's webhooks), newest first: started, queued, deduplicated, filtered, resolved or refused, with the run each started.",
    input: v.strictObject({ trigger: id, limit, cursor: v.optional(v.string()) }),
    call: (client, { trigger, ...page }) => client.triggers.deliveries(trigger, page),
  }),
  get_usage: tool({
    description:
      'Runs, tokens and spend per UTC day (today first), in total and by workspace, agent, schedule and trigger, with the daily limits in force. estimatedCostUsd is the part of costUsd estimated from token counts.',
    input: v.strictObject({ days: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(USAGE_DAYS_MAX))), workspaceId: v.optional(id) }),
    call: (client, asked) => client.usage(asked),
  }),
  cancel_run: tool({
    description: 'Cancel a running run (its whole process group is stopped).',
    input: v.strictObject({ taskId: id }),
    call: (client, { taskId }) => client.cancel(taskId),
  }),
  send_message: tool({
    description: "Send a running run's agent a follow-up: it is given as the agent's next turn, on the same session (a turn under way is not interrupted).",
    input: v.strictObject({ taskId: id, text: MessageBody.entries.text }),
    call: (client, { taskId, text }) => client.message(taskId, text),
  }),
  wait_run: tool({
    description: 'Wait for a run to end and answer its final record; after timeoutSeconds (default 600) answers the record as it is.',
    input: v.strictObject({ taskId: id, timeoutSeconds: v.optional(v.pipe(v.number(), v.minValue(1), v.maxValue(3600))) }),
    call: (client, { taskId, timeoutSeconds }) => client.wait(taskId, { signal: AbortSignal.timeout((timeoutSeconds ?? 600) * 1000) }),
  }),
  list_approvals: tool({
    description:
      'The questions of runs whose agents must ask (permissions "ask"): with no filter, every pending one; or a workspace\'s, or a run\'s. Each names what the agent wants to do (its kind of tool, title, files) and when it gets its fallback.',
    input: v.strictObject({
      workspaceId: v.optional(id),
      taskId: v.optional(id),
      status: v.optional(v.picklist(APPROVAL_STATUSES)),
      limit,
      cursor: v.optional(v.string()),
    }),
    call: (client, { workspaceId, ...filter }) => client.approvals.list({ ...(workspaceId ? { workspace: workspaceId } : {}), ...filter }),
  }),
  answer_approval: tool({
    description:
      'Answer a question of a run: allow or deny what its agent asked; scope "run" answers every later question of the same kind in that run. The agent is told at once.',
    input: v.strictObject({ approvalId: id, decision: v.picklist(['allow', 'deny']), scope: v.optional(v.picklist(['once', 'run'])) }),
    call: (client, { approvalId, ...answer }) => client.approvals.answer(approvalId, answer),
  }),
  read_inbox: tool({
    description: "Read a workspace's Inbox, where agents report their results, newest first.",
    input: v.strictObject({ workspaceId: id, unread: v.optional(v.boolean()), limit }),
    call: async (client, { workspaceId, unread, limit: max = 20 }) => {
      const items = [];
      for await (const item of client.inbox.list(workspaceId, { unread, pageSize: max })) {
        items.push(item);
        if (items.length >= max) break;
      }
      return { items };
    },
  }),
  inbox_push: tool({
    description: "Report a result to the workspace's Inbox. Inside a run, the run's own workspace and token are used.",
    input: v.strictObject({ workspaceId: v.optional(id), title: InboxPush.entries.title, body: InboxPush.entries.body }),
    call: (client, { workspaceId, title, body }, context) => {
      const target = workspaceId ?? context.workspaceId;
      if (!target) throw new HeadlessError(400, 'invalid_body', 'workspaceId is required outside a run');
      return client.inbox.push(target, { title, body });
    },
  }),
};

/** An MCP server whose tools call the API through `client`. */
export async function createMcpServer(client: HeadlessClient, context: McpContext = {}) {
  // Loaded when MCP is used, so the library and the daemon do not pay for the SDK otherwise.
  const [{ Server }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/index.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  const server = new Server({ name: 'headless-run-webhook', version }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => {
      const { $schema: _, ...inputSchema } = toJsonSchema(t.input, { errorMode: 'ignore', typeMode: 'input' }) as Record<string, unknown>;
      return { name, description: t.description, inputSchema: inputSchema as { type: 'object' } };
    }),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const t = TOOLS[request.params.name];
    if (!t) return failure(`unknown tool "${request.params.name}"`);
    const args = v.safeParse(t.input, request.params.arguments ?? {});
    if (!args.success) {
      // The request schemas' messages are problem codes (e.g. prompt_required); others are invalid_body.
      const issue = args.issues[0];
      const code = /^[a-z_]+$/.test(issue.message) ? issue.message : 'invalid_body';
      const field = v.getDotPath(issue);
      return failure(`${code}: ${field ? `argument "${field}" is invalid` : 'the arguments have the wrong shape'} (${issue.message})`);
    }
    try {
      const result = (await t.call(client, args.output, context)) as Record<string, unknown>;
      return { content: [{ type: 'text' as const, text: JSON.stringify(result) }], structuredContent: result };
    } catch (error) {
      if (error instanceof HeadlessError) return failure(`${error.code}: ${error.message}`);
      throw error;
    }
  });
  return server;
}

const failure = (text: string) => ({ isError: true, content: [{ type: 'text' as const, text }] });

/** Answers one Streamable HTTP request (stateless: a server per request, JSON answers). */
export async function answerMcp(request: Request, client: HeadlessClient): Promise<Response> {
  const { WebStandardStreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js');
  const server = await createMcpServer(client);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request);
  } finally {
    await server.close();
  }
}
