/** The HTTP client behind `headless-inbox`. */

export class InboxPushError extends Error {}

export interface PushInput {
  title: string;
  body: string;
  env: NodeJS.ProcessEnv;
}

/** Pushes one item; resolves to the created item, rejects with a message fit for a human. */
export async function pushToInbox({ title, body, env }: PushInput): Promise<{ id: string }> {
  const { HEADLESS_API_URL: api, HEADLESS_WORKSPACE_ID: workspace, HEADLESS_RUN_TOKEN: token } = env;
  if (!api || !workspace || !token) {
    const missing = Object.entries({ HEADLESS_API_URL: api, HEADLESS_WORKSPACE_ID: workspace, HEADLESS_RUN_TOKEN: token }).filter(([, value]) => !value);
    throw new InboxPushError(`not inside a headless run: ${missing.map(([name]) => name).join(', ')} not set`);
  }
  const url = `${api.replace(/\/+$/, '')}/api/workspaces/${encodeURIComponent(workspace)}/inbox`;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${env.HEADLESS_RUN_TOKEN}` },
      body: JSON.stringify({ title, body }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    throw new InboxPushError(`cannot reach the headless service at ${env.HEADLESS_API_URL}: ${cause}`);
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
    throw new InboxPushError(`push refused (HTTP ${response.status}) ${detail}`.trim());
  }
  return JSON.parse(text) as { id: string };
}
