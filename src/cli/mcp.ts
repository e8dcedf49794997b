import { parseArgs } from 'node:util';
import { createClient } from '../client/index';
import { createMcpServer } from '../mcp/server';
import { callerUrl } from './data-dir';
import { fail } from './fail';

/** `headless-run-webhook mcp`: the API as MCP tools over stdio, for an AI agent to call. */

export const MCP_USAGE = `Usage: headless-run-webhook mcp [--url URL]

Serves MCP over stdio (tools: start_run, get_run, list_runs, cancel_run, wait_run, read_inbox,
inbox_push), calling the daemon at --url (default: $HEADLESS_URL, else $HEADLESS_API_URL inside a run,
else the daemon running on this machine's data directory, else http://127.0.0.1:47331) with
HEADLESS_ADMIN_TOKEN, or inside a run with its HEADLESS_RUN_TOKEN (which may only push to its own workspace's Inbox).`;

export async function mcp(argv: string[]): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { url: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (error) {
    fail(`${error instanceof Error ? error.message : String(error)}\n${MCP_USAGE}`);
  }
  if (values.help) return void process.stdout.write(`${MCP_USAGE}\n`);
  const env = process.env;
  const client = createClient({
    url: values.url ?? env.HEADLESS_URL ?? env.HEADLESS_API_URL ?? callerUrl(env),
    token: env.HEADLESS_ADMIN_TOKEN || env.HEADLESS_RUN_TOKEN || undefined,
  });
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  const server = await createMcpServer(client, { workspaceId: env.HEADLESS_WORKSPACE_ID || undefined });
  await server.connect(new StdioServerTransport());
}
