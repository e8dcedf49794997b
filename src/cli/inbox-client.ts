/** The HTTP client behind `headless-inbox`. */
import { nodeFetch } from '../client/node-fetch';

// A plain socket, as the caller CLI's: Node's fetch (undici) costs about 30 ms of CPU to load on
// Node 22 and 24, more than the rest of the command (docs/performance.md).
const send = nodeFetch();

export class InboxPushError extends Error {}

export interface PushInput {
  title: string;
  body: string;
  env: NodeJS.ProcessEnv;
}

/** Pushes one item; resolves to the created item, rejects with a message fit for a human. */
export async function pushToInbox({ title, body, env }: PushInput): Promise<{ id: string }> {
  const workspace = need(env, 'HEADLESS_WORKSPACE_ID');
  return (await callService(env, `/api/workspaces/${encodeURIComponent(workspace)}/inbox`, { title, body }, 'push')) as { id: string };
}

/** Sends the run's answer (docs/structured-output.md); rejects, saying what does not match, when it does not. */
export async function sendResult({ value, env }: { value: unknown; env: NodeJS.ProcessEnv }): Promise<void> {
  const taskId = need(env, 'HEADLESS_TASK_ID');
  await callService(env, `/api/headless/${encodeURIComponent(taskId)}/result`, { value }, 'answer');
}

/** The run's variables it needs, or a message that it is not inside a headless run. */
function need(env: NodeJS.ProcessEnv, name: string): string {
  const names = ['HEADLESS_API_URL', 'HEADLESS_RUN_TOKEN', name];
  const missing = names.filter((n) => !env[n]);
  if (missing.length > 0) throw new InboxPushError(`not inside a headless run: ${missing.join(', ')} not set`);
  return env[name] as string;
}

/** POSTs `body` to the service with the run's token. */
async function callService(env: NodeJS.ProcessEnv, path: string, body: unknown, what: string): Promise<unknown> {
  const api = need(env, 'HEADLESS_API_URL');
  let response: Response;
  try {
    response = await send(`${api.replace(/\/+$/, '')}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${env.HEADLESS_RUN_TOKEN}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    throw new InboxPushError(`cannot reach the headless service at ${api}: ${cause}`);
  }
  const text = await response.text();
  if (!response.ok) {
    let detail = text;
    try {
      const problem = JSON.parse(text) as { code?: string; detail?: string };
      detail = `${problem.code ?? response.status}: ${problem.detail ?? ''}`;
    } catch {
      // Not problem JSON: show the status and raw text.
    }
    throw new InboxPushError(`${what} refused (HTTP ${response.status}) ${detail}`.trim());
  }
  return JSON.parse(text);
}
