/**
 * @module A pull request on GitHub (or GitHub Enterprise, at its `apiUrl`), through Octokit's
 * request (docs/decisions.md: the smallest Octokit that does the job): the open one of the branch
 * if there is one (a resumed Session pushes the same branch again), else a new one.
 */
import { loadOptional } from '../util/optional-package';
import { FORGE_TIMEOUT_MS, type OpenedPullRequest, type PullRequestAsk } from './forge';

const PUBLIC_API = 'https://api.github.com';

export async function githubPullRequest(ask: PullRequestAsk): Promise<OpenedPullRequest> {
  const [owner = '', repo = ''] = ask.repository.split('/');
  // Optional in the lean install (packages/core): only a workspace publishing to GitHub needs it.
  const { request } = await loadOptional(() => import('@octokit/request'), '@octokit/request', 'A pull request on GitHub');
  const api = request.defaults({
    baseUrl: (ask.apiUrl ?? PUBLIC_API).replace(/\/+$/, ''),
    headers: { authorization: `Bearer ${ask.token}`, 'user-agent': 'headless-run-webhook', 'x-github-api-version': '2022-11-28' },
    request: { signal: AbortSignal.timeout(FORGE_TIMEOUT_MS) },
  });
  const open = await api('GET /repos/{owner}/{repo}/pulls', { owner, repo, head: `${owner}:${ask.head}`, state: 'open', per_page: 1 });
  const found = open.data[0];
  if (found !== undefined) return { url: found.html_url, number: found.number, draft: found.draft === true, existing: true };
  const base = ask.base ?? (await api('GET /repos/{owner}/{repo}', { owner, repo })).data.default_branch;
  const made = await api('POST /repos/{owner}/{repo}/pulls', { owner, repo, head: ask.head, base, title: ask.title, body: ask.body, draft: ask.draft });
  return { url: made.data.html_url, number: made.data.number, draft: made.data.draft === true };
}
