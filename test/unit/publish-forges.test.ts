import { HttpResponse, http } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PullRequestAsk } from '../../src/core/worktrees/forge';
import { githubPullRequest } from '../../src/core/worktrees/github';
import { gitlabMergeRequest } from '../../src/core/worktrees/gitlab';
import { pullRequestBody } from '../../src/core/worktrees/pull-request-text';

/**
 * docs/worktrees.md: Publishing: the forge calls, against msw answering as GitHub's and GitLab's
 * REST documentation shows (no forge runs here). Each request is asserted as it was sent.
 */
const server = setupServer();
beforeAll(() => server.listen({ onUnhandledRequest: 'error' }));
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

interface Seen {
  method: string;
  url: string;
  headers: Headers;
  body: unknown;
}
const seen: Seen[] = [];
afterEach(() => {
  seen.length = 0;
});
async function note(request: Request): Promise<void> {
  const text = request.method === 'GET' ? '' : await request.clone().text();
  seen.push({ method: request.method, url: request.url, headers: request.headers, body: text === '' ? undefined : JSON.parse(text) });
}

/** A handler that notes the request, then answers. */
const noted =
  (answer: () => Response) =>
  async ({ request }: { request: Request }): Promise<Response> => {
    await note(request);
    return answer();
  };

const ask = (over: Partial<PullRequestAsk> = {}): PullRequestAsk => ({
  repository: 'octo/app',
  token: 'ghp_forgeToken0123456789',
  head: 'headless/ses_1',
  title: 'Fix the login bug',
  body: 'the body',
  draft: true,
  ...over,
});

/** GitHub's "Create a pull request" answer (201), cut to the fields read and a few beside. */
const githubPull = (number: number, draft: boolean) => ({
  url: `https://api.github.com/repos/octo/app/pulls/${number}`,
  id: 1000 + number,
  html_url: `https://github.com/octo/app/pull/${number}`,
  number,
  state: 'open',
  title: 'Fix the login bug',
  draft,
  head: { ref: 'headless/ses_1', sha: 'abc' },
  base: { ref: 'main', sha: 'def' },
});

describe('GitHub, through Octokit', () => {
  it('opens a draft pull request on the default branch, with the token, head, base, title and body it was given', async () => {
    server.use(
      http.get(
        'https://api.github.com/repos/octo/app/pulls',
        noted(() => HttpResponse.json([])),
      ),
      http.get(
        'https://api.github.com/repos/octo/app',
        noted(() => HttpResponse.json({ id: 1, full_name: 'octo/app', default_branch: 'trunk' })),
      ),
      http.post(
        'https://api.github.com/repos/octo/app/pulls',
        noted(() => HttpResponse.json(githubPull(7, true), { status: 201 })),
      ),
    );
    const opened = await githubPullRequest(ask());
    expect(opened).toEqual({ url: 'https://github.com/octo/app/pull/7', number: 7, draft: true });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET https://api.github.com/repos/octo/app/pulls?head=octo%3Aheadless%2Fses_1&state=open&per_page=1',
      'GET https://api.github.com/repos/octo/app',
      'POST https://api.github.com/repos/octo/app/pulls',
    ]);
    for (const s of seen) expect(s.headers.get('authorization')).toBe('Bearer ghp_forgeToken0123456789');
    expect(seen[2]?.body).toEqual({ head: 'headless/ses_1', base: 'trunk', title: 'Fix the login bug', body: 'the body', draft: true });
  });

  it("GitHub Enterprise at its apiUrl, a base asked for, ready for review; a branch's open pull request is found, not opened twice", async () => {
    const api = 'https://ghe.example.com/api/v3';
    let open: unknown[] = [];
    server.use(
      http.get(
        `${api}/repos/octo/app/pulls`,
        noted(() => HttpResponse.json(open)),
      ),
      http.post(
        `${api}/repos/octo/app/pulls`,
        noted(() => HttpResponse.json(githubPull(8, false), { status: 201 })),
      ),
    );
    expect(await githubPullRequest(ask({ apiUrl: `${api}/`, base: 'release', draft: false }))).toEqual({
      url: 'https://github.com/octo/app/pull/8',
      number: 8,
      draft: false,
    });
    expect(seen[1]?.body).toMatchObject({ base: 'release', draft: false });
    open = [githubPull(8, false)];
    seen.length = 0;
    expect(await githubPullRequest(ask({ apiUrl: api }))).toEqual({ url: 'https://github.com/octo/app/pull/8', number: 8, draft: false, existing: true });
    expect(seen.map((s) => s.method)).toEqual(['GET']);
  });

  it("a refusal is an error naming GitHub's message", async () => {
    server.use(
      http.get('https://api.github.com/repos/octo/app/pulls', () => HttpResponse.json([])),
      http.post('https://api.github.com/repos/octo/app/pulls', () =>
        HttpResponse.json(
          { message: 'Validation Failed', errors: [{ resource: 'PullRequest', code: 'custom', message: 'No commits between main and headless/ses_1' }] },
          { status: 422 },
        ),
      ),
    );
    await expect(githubPullRequest(ask({ base: 'main' }))).rejects.toThrow(/Validation Failed/);
  });
});

/** GitLab's "Create MR" answer (201), cut to the fields read and a few beside. */
const gitlabMr = (iid: number, title: string, draft: boolean) => ({
  id: 2000 + iid,
  iid,
  project_id: 42,
  title,
  description: 'the body',
  state: 'opened',
  target_branch: 'main',
  source_branch: 'headless/ses_1',
  draft,
  work_in_progress: draft,
  web_url: `https://gitlab.com/group/app/-/merge_requests/${iid}`,
});

describe("GitLab's REST API, with fetch", () => {
  const project = 'https://gitlab.com/api/v4/projects/group%2Fapp';

  it('opens a draft merge request (its title marked Draft:) on the default branch, with PRIVATE-TOKEN', async () => {
    server.use(
      http.get(
        `${project}/merge_requests`,
        noted(() => HttpResponse.json([])),
      ),
      http.get(
        project,
        noted(() => HttpResponse.json({ id: 42, path_with_namespace: 'group/app', default_branch: 'main' })),
      ),
      http.post(
        `${project}/merge_requests`,
        noted(() => HttpResponse.json(gitlabMr(3, 'Draft: Fix the login bug', true), { status: 201 })),
      ),
    );
    const opened = await gitlabMergeRequest(ask({ repository: 'group/app', token: 'glpat-forgeToken0123' }));
    expect(opened).toEqual({ url: 'https://gitlab.com/group/app/-/merge_requests/3', number: 3, draft: true });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      `GET ${project}/merge_requests?state=opened&source_branch=headless%2Fses_1&per_page=1`,
      `GET ${project}`,
      `POST ${project}/merge_requests`,
    ]);
    for (const s of seen) expect(s.headers.get('private-token')).toBe('glpat-forgeToken0123');
    expect(seen[2]?.body).toEqual({ source_branch: 'headless/ses_1', target_branch: 'main', title: 'Draft: Fix the login bug', description: 'the body' });
  });

  it('a self-hosted GitLab at its apiUrl, by project id, ready; a refusal names its status and message', async () => {
    const api = 'https://gitlab.example.com/api/v4/projects/42';
    server.use(
      http.get(`${api}/merge_requests`, () => HttpResponse.json([])),
      http.post(
        `${api}/merge_requests`,
        noted(() => HttpResponse.json(gitlabMr(4, 'Fix the login bug', false), { status: 201 })),
      ),
    );
    const opened = await gitlabMergeRequest(ask({ apiUrl: 'https://gitlab.example.com/api/v4', repository: '42', base: 'develop', draft: false }));
    expect(opened).toMatchObject({ number: 4, draft: false });
    expect(seen[0]?.body).toMatchObject({ target_branch: 'develop', title: 'Fix the login bug' });
    server.use(
      http.post(`${api}/merge_requests`, () =>
        HttpResponse.json({ message: ['Another open merge request already exists for this source branch'] }, { status: 409 }),
      ),
    );
    await expect(gitlabMergeRequest(ask({ apiUrl: 'https://gitlab.example.com/api/v4', repository: '42', base: 'develop' }))).rejects.toThrow(
      /GitLab answered 409: .*already exists/,
    );
  });
});

describe("a pull request's body", () => {
  it('shows the agent message in a fence its own backticks cannot close, the verify verdict, and the link', () => {
    const body = pullRequestBody({
      taskId: 'run_1',
      lastMessage: 'Done. ``` @everyone ![x](https://evil.example/p.png)',
      verify: {
        verdict: 'passed',
        attempts: [
          { attempt: 1, passed: false, checks: [], at: '' },
          { attempt: 2, passed: true, checks: [], at: '' },
        ],
      },
      link: 'https://headless.example.com/#run_1',
      branch: 'headless/ses_1',
      sha: 'abc123',
    });
    expect(body).toContain('````text\nDone. ``` @everyone ![x](https://evil.example/p.png)\n````');
    expect(body).toContain('Checks: passed, after 2 attempts.');
    expect(body).toContain('Run [run_1](https://headless.example.com/#run_1), branch `headless/ses_1` at abc123.');
  });
});
