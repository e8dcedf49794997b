/**
 * @module Publishing a run that ended in a worktree (docs/worktrees.md: Publishing): once it has
 * `succeeded` (its verify loop passed, where it had one), its branch's head is pushed to its
 * workspace's remote and, where asked and a forge is configured, a pull request opened. What
 * became of it is the record's `publish`: a failure is recorded there, and the run keeps its
 * outcome (its work is on its branch whatever the remote said).
 */
import type { RunChanges, RunPublish, RunStatus } from '../../contract/records';
import type { PublishSpec } from '../../contract/run-spec';
import type { PublishSettings } from '../types';
import type { OpenedPullRequest, PullRequestAsk } from './forge';
import { githubPullRequest } from './github';
import { gitlabMergeRequest } from './gitlab';
import { repositoryOf } from './places';
import { type RunSummary, pullRequestBody, pullRequestTitle } from './pull-request-text';
import { readSecret } from '../util/secret-source';
import { publishAsked } from './publish-settings';
import { pushBranch } from './push';

const DEFAULT_USERNAME = 'x-access-token';

export interface PublishInput {
  /** The workspace's folder: its repository's objects are pushed. */
  workspacePath: string;
  settings: PublishSettings;
  asked: PublishSpec;
  status: RunStatus;
  /** What it changed, as its final record has it; undefined when that could not be read. */
  changes?: RunChanges;
  run: Omit<RunSummary, 'branch' | 'sha'>;
  env: NodeJS.ProcessEnv;
}

/** Why nothing is published, or undefined. */
function skipped(input: PublishInput): string | undefined {
  const { status, changes } = input;
  if (status !== 'succeeded') return `the run ended ${status}`;
  if (changes === undefined) return 'what the run changed could not be read';
  if (changes.notCommitted !== undefined) return `its work is not all on its branch (${changes.notCommitted})`;
  if (changes.base === changes.head) return 'the run changed nothing';
  return undefined;
}

const failure = (code: string, error: unknown) => ({ code, message: error instanceof Error ? error.message : String(error) });

/** Publishes the run as its spec asks: what the record's `publish` says. */
export async function publishRun(input: PublishInput): Promise<RunPublish> {
  const why = skipped(input);
  const changes = input.changes;
  if (why !== undefined || changes === undefined) return { skipped: why ?? 'nothing to publish' };
  const { settings } = input;
  const remote = settings.remote;
  const pushed = { remote, branch: changes.branch, sha: changes.head };
  let token: string | undefined;
  try {
    token = settings.token === undefined ? undefined : readSecret(settings.token, 'publishTo.token', input.env);
    const repo = await repositoryOf(input.workspacePath);
    if (repo === undefined) throw new Error(`${input.workspacePath} is no longer in a git repository`);
    const credential = token === undefined ? undefined : { username: settings.username ?? DEFAULT_USERNAME, token };
    await pushBranch({ commonDir: repo.commonDir, sha: changes.head, branch: changes.branch, remote, ...(credential ? { credential } : {}) });
  } catch (error) {
    return { error: failure('push_failed', error) };
  }
  const forge = settings.forge;
  if (!publishAsked(input.asked).pullRequest || forge === undefined || token === undefined) return { pushed };
  const summary: RunSummary = { ...input.run, branch: changes.branch, sha: changes.head };
  const asked = input.asked.pullRequest;
  const ask: PullRequestAsk = {
    ...(forge.apiUrl === undefined ? {} : { apiUrl: forge.apiUrl }),
    repository: forge.repository,
    token,
    head: changes.branch,
    ...(asked?.base === undefined ? {} : { base: asked.base }),
    title: pullRequestTitle(asked?.title, summary),
    body: pullRequestBody(summary),
    draft: asked?.draft ?? true,
  };
  try {
    const opened: OpenedPullRequest = forge.kind === 'github' ? await githubPullRequest(ask) : await gitlabMergeRequest(ask);
    return { pushed, pullRequest: opened };
  } catch (error) {
    return { pushed, error: failure('pull_request_failed', error) };
  }
}
