/** @module What the service asks of a forge (GitHub, GitLab) as it publishes a run, and what it answers (docs/worktrees.md: Publishing). */

/** A pull request to open from a pushed branch of the same repository. */
export interface PullRequestAsk {
  /** The forge's API base URL. @default the public forge's */
  apiUrl?: string;
  /** GitHub: `owner/name`; GitLab: the project's path or id. */
  repository: string;
  token: string;
  /** The pushed branch. */
  head: string;
  /** The branch it merges into. @default the repository's default branch, asked of the forge */
  base?: string;
  title: string;
  body: string;
  draft: boolean;
}

/** The pull request opened, or the open one the branch already had (a resumed Session's). */
export interface OpenedPullRequest {
  url: string;
  number: number;
  draft: boolean;
  existing?: boolean;
}

/** How long one call to a forge may take. */
export const FORGE_TIMEOUT_MS = 30_000;
