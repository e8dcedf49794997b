/** The records the API shows: runs, Sessions, Inbox items, webhook deliveries. */
import type { RunSpec } from './run-spec';

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted', 'expired'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Not ended yet: waiting in the queue, or running. Every other status is final. */
export const hasEnded = (status: RunStatus): boolean => status !== 'queued' && status !== 'running';

/** The types of a run's events (docs/http-api.md: Follow a run). */
export const RUN_EVENT_TYPES = [
  'run.queued',
  'run.started',
  'agent.session',
  'message',
  'tool',
  'usage',
  'error',
  'permission.requested',
  'permission.answered',
  'trigger.resolved',
  'follow-up',
  'verify.checked',
  'verify.verdict',
  'run.ended',
] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

/** What became of a trigger's delivery (docs/triggers.md: Deliveries). */
export const DELIVERY_OUTCOMES = ['started', 'queued', 'deduplicated', 'filtered', 'resolved', 'refused'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/** The events a webhook can be told of. */
export const WEBHOOK_EVENTS = ['run.ended', 'agent.session', 'permission.requested'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/** What a run's agent may do, and where (docs/security.md: Confining agents). */
export interface RunPolicy {
  /**
   * `read-only`: the agent's own flags forbid edits and commands (and, in a sandbox, its workspace
   * is mounted read-only). `ask`: each permission the agent asks for is answered by the policy's
   * rules, else by a caller (docs/approvals.md).
   */
  permissions: 'full' | 'read-only' | 'ask';
  /** Under `ask`: how long a question waits for its answer, and the answer it gets then. */
  approvals?: ApprovalPolicy;
  /** Run inside a bubblewrap sandbox. */
  sandbox: boolean;
  /** The placement provider that placed it, when one of the handler's own (`none` and `worktree` are not named: a worktree run has `worktree`). */
  isolation?: string;
  /** Run in a git worktree of its own (`isolation: "worktree"`), made from this ref (docs/worktrees.md). */
  worktree?: { ref: string };
}

/** How a run under `permissions: "ask"` is answered (docs/approvals.md). */
export interface ApprovalPolicy {
  /** A question unanswered this long gets the fallback. */
  timeoutMs: number;
  fallback: 'allow' | 'deny';
  /** Answered without asking, the first that matches; none matches: a caller is asked. */
  rules?: ApprovalRule[];
}

/** A rule of an approval policy: a tool call of one of `kinds`, every path it names inside one of `paths`. */
export interface ApprovalRule {
  /** The agent's kinds of tool (ACP's: read, edit, delete, move, search, execute, think, fetch, other). Absent: any. */
  kinds?: string[];
  /** Folders, relative to the run's working directory. Absent: any; present, a call naming no path never matches. */
  paths?: string[];
  answer: 'allow' | 'deny';
}

/** An approval's states: `interrupted`, the service stopped while it waited; `abandoned`, its run ended first. */
export const APPROVAL_STATUSES = ['pending', 'allowed', 'denied', 'interrupted', 'abandoned'] as const;

/** A permission an agent asked for under `permissions: "ask"` (docs/approvals.md). */
export interface ApprovalRecord {
  id: string;
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  status: (typeof APPROVAL_STATUSES)[number];
  /** What the agent wants to do, as it says it, shown (docs/approvals.md): invisible characters escaped, bounded, marked where cut. */
  tool: ApprovalTool;
  createdAt: string;
  /** When it gets its policy's fallback. */
  expiresAt: string;
  fallback: 'allow' | 'deny';
  answer: ApprovalAnswer | null;
}

export interface ApprovalTool {
  title: string;
  /** Its kind, where the agent says it. */
  kind?: string;
  /** The files it names, as the agent gave them (at most 20). */
  paths: string[];
  /** The agent offers to remember an allow for the rest of its session. */
  canAlways: boolean;
  /** Every argument of the tool call, one `name: value` a line (a URL, a query, a path, a command), shown as the title is. */
  input?: string;
  /** The title or the arguments were cut (marked where): no rule allows it, a caller or the fallback answers. */
  truncated?: true;
}

export interface ApprovalAnswer {
  decision: 'allow' | 'deny';
  /** `run`: every later question of the same kind in this run gets the same answer. */
  scope: 'once' | 'run';
  /** `caller`: answered through the API; `fallback`: its time ran out. */
  by: 'caller' | 'fallback';
  at: string;
}

/** What a run was asked and answered (its record's `approvals`). */
export interface RunApprovals {
  asked: number;
  allowed: number;
  denied: number;
  /** Of those, answered by the fallback. */
  timedOut: number;
  /** Questions waiting for an answer now. */
  pending: string[];
}

/** What a run in a worktree changed (docs/worktrees.md): its branch from `base` to `head`, the work it left uncommitted included. */
export interface RunChanges {
  /** The run's branch: its Session's, `headless/<resumeId>`. */
  branch: string;
  /** The commit the run started from. */
  base: string;
  /** The branch's commit when the run ended. */
  head: string;
  /** The service committed work the agent left uncommitted (`head` is that commit). */
  committed: boolean;
  /** Files changed between `base` and `head` (at most 1000; `filesTruncated` says when there were more). */
  files: ChangedFile[];
  filesTruncated?: boolean;
  /** Why the work the agent left uncommitted was not committed (too large, the worktree off its branch): it stays in the kept worktree. */
  notCommitted?: string;
  /** The worktree's folder, while it is kept (its workspace's `worktree.cleanup`); null once removed. */
  worktree: string | null;
}

/** `GET /api/headless/:taskId/changes`: what a run in a worktree changed, and its patch (`git diff`, cut at 1 MB). */
export interface RunChangesView {
  taskId: string;
  changes: RunChanges;
  patch: string;
  patchTruncated: boolean;
}

export interface ChangedFile {
  path: string;
  status: 'added' | 'modified' | 'deleted' | 'renamed';
  /** A renamed file's old path. */
  from?: string;
}

/**
 * Where a run came from: a caller of the API, or an occurrence of a schedule (a "run now"
 * included). Stored once on the record when it is accepted.
 */
export type RunSource =
  | { kind: 'api' }
  | { kind: 'schedule'; name: string; scheduledFor: string }
  /** A trigger's delivery (docs/triggers.md): its record in the trigger's deliveries, and the sender's own id of it. */
  | { kind: 'trigger'; name: string; delivery: string; deliveryId?: string };

export interface RunError {
  code: string;
  message: string;
}

/**
 * Which rule of the agent selection (docs/http-api.md: Agent selection) chose a run's agent: the
 * start named it (`asked`, a schedule's or trigger's `run.agent` included), its Session's
 * (`session`), the workspace's `headlessAgent`, its most recent (`recent`), the workspace's or the
 * installation's `defaultAgent`, or the first installed in the registry's order (`first`).
 */
export const AGENT_RULES = ['asked', 'session', 'headlessAgent', 'recent', 'workspaceDefault', 'installationDefault', 'first'] as const;
export type AgentRule = (typeof AGENT_RULES)[number];

/** Each rule as a reader is told it (the caller CLI, the status page). */
export const AGENT_RULE_SAID: Record<AgentRule, string> = {
  asked: 'named by its start',
  session: "its Session's",
  headlessAgent: "the workspace's headlessAgent",
  recent: "the workspace's most recent",
  workspaceDefault: "the workspace's defaultAgent",
  installationDefault: "the installation's defaultAgent",
  first: 'the first installed',
};

/** The run record: process status only, never the prompt, output or a token. */
/** A secret a run was given: its variable's name, and the operator's secret it names where it names one (never a value). */
export interface RunSecret {
  name: string;
  secret?: string;
}

export interface RunRecord {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  /** Which rule chose its agent (absent on runs accepted before it was recorded). */
  agentChosenBy?: AgentRule;
  /** The secrets its agent and checks were given, by name (docs/security.md: Per-run secrets). */
  secrets?: RunSecret[];
  mode: 'async' | 'sync';
  status: RunStatus;
  createdAt: string;
  endedAt: string | null;
  durationMs: number | null;
  timeoutMs: number;
  exitCode: number | null;
  signal: string | null;
  /** While `queued`: its place in the queue, 1 being the next to start. */
  queuePosition?: number;
  /** When it left the queue and its agent was started (only for a run that was queued). */
  startedAt?: string;
  /** Where it came from. */
  source: RunSource;
  /** The schedule that started it, if one did (docs/queue-and-schedules.md): its `source`'s name. */
  schedule?: string;
  /** The occurrence of its schedule it ran for (ISO); for a "run now", the moment it was asked. */
  scheduledFor?: string;
  /**
   * Everything it was asked, as it was resolved when it was accepted: the start's fields over its
   * schedule's or trigger's defaults, over its workspace's (docs/http-api.md: The run spec). Absent
   * on runs accepted before the spec was recorded.
   */
  spec?: RunSpec;
  /** Set when its agent was confined: its workspace's (or schedule's) policy when it was accepted. */
  policy?: RunPolicy;
  /** The budget it was started with, if any: the limits it is stopped at. */
  budget?: RunBudget;
  /** The label given at start, if any. */
  title?: string;
  /** The string pairs given at start, if any (at most 16); the list filters by them. */
  metadata?: Record<string, string>;
  error?: RunError;
  /** Tokens (and cost) the agent reported for the run, where it reports them. */
  usage?: RunUsage;
  /** The agent's final assistant text, where it prints it (at most 4000 characters). */
  lastMessage?: string;
  /** Its answer, matching the `outputSchema` it was started with (docs/structured-output.md). */
  result?: unknown;
  /** The permissions it asked for under `permissions: "ask"` (docs/approvals.md); each is at `GET /api/approvals?taskId=`. */
  approvals?: RunApprovals;
  /** Its verify loop (docs/verify.md): each attempt's checks, and the verdict. */
  verify?: RunVerify;
  /** What it changed, for a run in a worktree once it has ended; the patch is at `GET /api/headless/:taskId/changes`. */
  changes?: RunChanges;
  /** What became of its publishing, where its spec asked for it (docs/worktrees.md: Publishing). */
  publish?: RunPublish;
  /** Its webhook deliveries (on `GET /api/headless/:taskId` of a run that has webhooks). */
  webhooks?: WebhookDeliveryView[];
}

/**
 * A run's publishing (docs/worktrees.md: Publishing): its branch pushed, its pull request, or why
 * not. A failure is recorded here and never changes the run's outcome.
 */
export interface RunPublish {
  /** Its branch as pushed: the remote as its workspace names it (never a credential), the branch, the commit. */
  pushed?: { remote: string; branch: string; sha: string };
  /** Its pull (GitLab: merge) request: the one opened, or the open one its branch already had (`existing`). */
  pullRequest?: { url: string; number: number; draft: boolean; existing?: boolean };
  /** Why nothing was published: the run did not succeed, or changed nothing. */
  skipped?: string;
  /** What failed: `push_failed`, or `pull_request_failed` (the branch was pushed). */
  error?: RunError;
}

/** A run's verify loop as its record shows it (docs/verify.md). */
export interface RunVerify {
  /** `pending` while it goes on; `passed`; `failed` (still failing after its attempts, or its agent could go on no more); `stalled` (the same failure twice). */
  verdict: 'pending' | 'passed' | 'failed' | 'stalled';
  attempts: VerifyAttempt[];
}

/** One run of the checks, after one turn of the agent. */
export interface VerifyAttempt {
  /** 1 for the checks after the agent's first turn. */
  attempt: number;
  passed: boolean;
  checks: CheckResult[];
  /** Its grader's verdict, once its checks passed (docs/verify.md: A rubric grader). */
  grader?: GraderVerdict;
  at: string;
}

/** What a verify loop's grader answered, or why it could not. */
export interface GraderVerdict {
  /** The grader's own run. */
  taskId: string;
  verdict: 'pass' | 'fail';
  failedCriteria: string[];
  explanation: string;
}

export interface CheckResult {
  name: string;
  /** Null when it was stopped (`timedOut`) or killed by a signal. */
  exitCode: number | null;
  passed: boolean;
  durationMs: number;
  /** It ran past its timeout and was stopped. */
  timedOut?: true;
  /** The tail of its output (stdout and stderr as they came), at most its `outputChars`; escaped as the timeline is. */
  output: string;
}

/** A run's limits (docs/http-api.md: Budgets): tool calls, tokens (input and output), US dollars. */
export interface RunBudget {
  maxTurns?: number;
  maxTokens?: number;
  maxCostUsd?: number;
}

export interface RunUsage {
  inputTokens: number;
  outputTokens: number;
  /** In US dollars, where the agent reports it (or estimated from token prices: `costEstimated`). */
  costUsd?: number;
  /** The cost was estimated from the tokens and a price table, not reported by the agent. */
  costEstimated?: boolean;
}

export interface SessionView {
  resumeId: string;
  workspaceId: string;
  agent: string;
  status: 'idle' | 'busy' | 'retired';
  createdAt: string;
  lastRunAt: string;
  runCount: number;
  resumable: boolean;
}

export interface InboxItem {
  id: string;
  workspaceId: string;
  taskId: string | null;
  resumeId: string | null;
  title: string;
  body: string;
  createdAt: string;
  readAt: string | null;
}

export type DeliveryState = 'waiting' | 'pending' | 'delivered' | 'failed';

/** A delivery as the run record shows it. */
export interface WebhookDeliveryView {
  id: string | null;
  url: string;
  event: WebhookEvent;
  /** `waiting`: its event has not happened yet; `pending`: being delivered or retried. */
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: string | null;
  lastStatus?: number;
  lastError?: string;
  deliveredAt?: string;
}
