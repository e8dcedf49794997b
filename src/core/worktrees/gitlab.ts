/**
 * @module A merge request on GitLab (gitlab.com or a self-hosted one at its `apiUrl`), through its
 * REST API with fetch: the open one of the branch if there is one, else a new one
 * (`POST /projects/:id/merge_requests`). GitLab takes no draft flag on create: a draft's title
 * starts with `Draft:`, as GitLab reads it.
 */
import { FORGE_TIMEOUT_MS, type OpenedPullRequest, type PullRequestAsk } from './forge';

const PUBLIC_API = 'https://gitlab.com/api/v4';
/** Bytes of an error answer kept in the record's message. */
const ERROR_MAX = 300;

interface MergeRequest {
  iid: number;
  web_url: string;
  draft?: boolean;
}

/** One call: its JSON, or an error naming the status and what GitLab said. */
async function call<T>(url: string, token: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { 'PRIVATE-TOKEN': token, accept: 'application/json', ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    redirect: 'error',
    signal: AbortSignal.timeout(FORGE_TIMEOUT_MS),
  });
  if (!response.ok) throw new Error(`GitLab answered ${response.status}: ${(await response.text()).slice(0, ERROR_MAX)}`);
  return (await response.json()) as T;
}

export async function gitlabMergeRequest(ask: PullRequestAsk): Promise<OpenedPullRequest> {
  const project = `${(ask.apiUrl ?? PUBLIC_API).replace(/\/+$/, '')}/projects/${encodeURIComponent(ask.repository)}`;
  const query = new URLSearchParams({ state: 'opened', source_branch: ask.head, per_page: '1' });
  const [found] = await call<MergeRequest[]>(`${project}/merge_requests?${query}`, ask.token);
  if (found !== undefined) return { url: found.web_url, number: found.iid, draft: found.draft === true, existing: true };
  const base = ask.base ?? (await call<{ default_branch: string }>(project, ask.token)).default_branch;
  const title = ask.draft ? `Draft: ${ask.title}` : ask.title;
  const body = { source_branch: ask.head, target_branch: base, title, description: ask.body };
  const made = await call<MergeRequest>(`${project}/merge_requests`, ask.token, { method: 'POST', body });
  return { url: made.web_url, number: made.iid, draft: made.draft ?? ask.draft };
}
