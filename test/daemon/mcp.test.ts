import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, type Daemon, api, cleanupDaemons, startFakeDaemon, waitRun } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
import { PLACEMENT_NAME } from '../../src/contract/run-spec';

/** The MCP tools, called with the SDK's own client over stdio and over Streamable HTTP. */

const dirs: string[] = [];
let daemon: Daemon;
const clients: Client[] = [];

beforeAll(async () => {
  daemon = await startFakeDaemon(dirs);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await daemon.stop();
  cleanupDaemons(dirs);
});

async function connect(transport: 'stdio' | 'http', options: { env?: Record<string, string>; token?: string } = {}): Promise<Client> {
  const client = new Client({ name: 'test', version: '1.0.0' });
  if (transport === 'stdio') {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [CLI, 'mcp', '--url', daemon.url],
        env: { PATH: process.env.PATH!, ...options.env },
        stderr: 'pipe',
      }),
    );
  } else {
    const headers: Record<string, string> = options.token ? { authorization: `Bearer ${options.token}` } : {};
    await client.connect(new StreamableHTTPClientTransport(new URL(`${daemon.url}/mcp`), { requestInit: { headers } }));
  }
  clients.push(client);
  return client;
}

type ToolAnswer = { isError?: boolean; content: Array<{ type: string; text: string }>; structuredContent?: Record<string, any> };
const call = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as ToolAnswer;

describe.each(['stdio', 'http'] as const)('MCP over %s', (transport) => {
  it('lists the tools, with JSON Schema inputs from the request schemas', async () => {
    const client = await connect(transport);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'answer_approval',
      'cancel_run',
      'get_run',
      'get_run_changes',
      'get_usage',
      'inbox_push',
      'list_approvals',
      'list_runs',
      'list_trigger_deliveries',
      'read_inbox',
      'send_message',
      'start_run',
      'wait_run',
    ]);
    const start = tools.find((t) => t.name === 'start_run')!;
    expect(start.inputSchema).toMatchObject({
      type: 'object',
      required: ['workspaceId', 'prompt'],
      properties: { prompt: { type: 'string', maxLength: 16000 }, isolation: { type: 'string', pattern: PLACEMENT_NAME.source } },
    });
  });

  it('start_run, wait_run, get_run, list_runs, cancel_run, read_inbox', async () => {
    const client = await connect(transport);
    const started = await call(client, 'start_run', { workspaceId: 'ws', prompt: 'echo from mcp', agent: 'fake', title: 'From MCP', metadata: { via: 'mcp' } });
    expect(started.isError).toBeFalsy();
    const { taskId } = started.structuredContent!;
    const ended = await call(client, 'wait_run', { taskId });
    expect(ended.structuredContent).toMatchObject({ taskId, status: 'succeeded' });
    expect(JSON.parse(ended.content[0]!.text)).toMatchObject({ taskId, status: 'succeeded' });
    expect((await call(client, 'get_run', { taskId })).structuredContent).toMatchObject({
      taskId,
      status: 'succeeded',
      title: 'From MCP',
      metadata: { via: 'mcp' },
    });
    const filtered = (await call(client, 'list_runs', { workspaceId: 'ws', metadata: 'via:mcp', agent: 'fake' })).structuredContent!;
    // Both transports' runs are on this daemon: every one listed has the pair, this one among them.
    expect(filtered.runs.map((r: { taskId: string }) => r.taskId)).toContain(taskId);
    expect(filtered.runs.every((r: { metadata?: Record<string, string> }) => r.metadata?.via === 'mcp')).toBe(true);
    expect((await call(client, 'list_runs', { workspaceId: 'ws', limit: 50 })).structuredContent!.runs.map((r: { taskId: string }) => r.taskId)).toContain(
      taskId,
    );
    const long = (await call(client, 'start_run', { workspaceId: 'ws', prompt: 'sleep 30000', agent: 'fake' })).structuredContent!;
    // timeoutSeconds is kept on both transports: the record as it is then (the run sleeps on).
    expect((await call(client, 'wait_run', { taskId: long.taskId, timeoutSeconds: 1 })).structuredContent).toMatchObject({ status: 'running' });
    expect((await call(client, 'cancel_run', { taskId: long.taskId })).structuredContent).toMatchObject({ taskId: long.taskId });
    expect((await call(client, 'wait_run', { taskId: long.taskId, timeoutSeconds: 20 })).structuredContent!.status).toBe('cancelled');
    await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: `note ${transport}` });
    const inbox = (await call(client, 'read_inbox', { workspaceId: 'ws', unread: true })).structuredContent!;
    expect(inbox.items.map((i: { title: string }) => i.title)).toContain(`note ${transport}`);
  });

  it('get_usage: runs and spend per day from the records, the limits beside; bad days are refused', async () => {
    const client = await connect(transport);
    const { taskId } = (await call(client, 'start_run', { workspaceId: 'ws', prompt: 'echo counted', agent: 'fake' })).structuredContent!;
    await call(client, 'wait_run', { taskId });
    const usage = (await call(client, 'get_usage', { days: 2, workspaceId: 'ws' })).structuredContent!;
    expect(usage.days).toHaveLength(2);
    // Today's, or (should midnight pass meanwhile) yesterday's: the run is counted once, on one of them.
    const runs = usage.days.reduce((sum: number, d: { agents: Record<string, { runs: number }> }) => sum + (d.agents.fake?.runs ?? 0), 0);
    expect(runs).toBeGreaterThanOrEqual(1);
    expect(usage.limits).toEqual({ workspaces: { ws: {} }, schedules: {}, triggers: {} });
    const bad = await call(client, 'get_usage', { days: 91 });
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toMatch(/^invalid_body: argument "days"/);
  });

  it('errors come back as tool errors with the problem code; bad arguments too', async () => {
    const client = await connect(transport);
    const missing = await call(client, 'get_run', { taskId: 'run_nope' });
    expect(missing.isError).toBe(true);
    expect(missing.content[0]!.text).toMatch(/^run_not_found: /);
    const bad = await call(client, 'start_run', { workspaceId: 'ws', prompt: 'x', extra: 1 });
    expect(bad.isError).toBe(true);
    expect(bad.content[0]!.text).toMatch(/^invalid_body: /);
    expect((await call(client, 'start_run', { workspaceId: 'ws', prompt: '  ', agent: 'fake' })).content[0]!.text).toMatch(/^prompt_required: /);
  });
});

describe('MCP for an agent inside a run', () => {
  async function runToken(): Promise<{ taskId: string; token: string }> {
    const { taskId } = (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'dump-env; sleep 20000', agent: 'fake' })).json()) as {
      taskId: string;
    };
    let token = '';
    await waitFor(
      async () => {
        const out = (await (await api(daemon, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string };
        token = out.stdout ? ((JSON.parse(out.stdout.split('\n')[0]!) as Record<string, string>).HEADLESS_RUN_TOKEN ?? '') : '';
        return token !== '';
      },
      { what: 'the run token' },
    );
    return { taskId, token };
  }

  it('inbox_push with the run token (stdio: workspace and token from the environment); other tools are refused', async () => {
    const { taskId, token } = await runToken();
    const stdio = await connect('stdio', { env: { HEADLESS_RUN_TOKEN: token, HEADLESS_WORKSPACE_ID: 'ws' } });
    const pushed = await call(stdio, 'inbox_push', { title: 'from the agent', body: 'done' });
    expect(pushed.structuredContent).toMatchObject({ title: 'from the agent', workspaceId: 'ws', taskId });
    expect((await call(stdio, 'start_run', { workspaceId: 'ws', prompt: 'echo x', agent: 'fake' })).content[0]!.text).toMatch(/^unauthorized: /);
    const http = await connect('http', { token });
    expect((await call(http, 'inbox_push', { workspaceId: 'ws', title: 'over http' })).structuredContent).toMatchObject({ taskId });
    expect((await call(http, 'get_run', { taskId })).content[0]!.text).toMatch(/^unauthorized: /);
    await api(daemon, 'POST', `/api/headless/${taskId}/cancel`);
    await waitRun(daemon, taskId);
  });

  it('/mcp is behind the gate: a foreign Host (DNS rebinding) is refused', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${daemon.url}/mcp`,
        { method: 'POST', headers: { host: 'evil.example', 'content-type': 'application/json', accept: 'application/json, text/event-stream' } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(403);
  });
});
