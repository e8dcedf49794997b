/** What the core stores and is configured with, beside the records the API shows. */
import type { ApprovalRecord, RunRecord, RunSource, WebhookEvent } from '../contract/records';
import type { RunSpec } from '../contract/run-spec';
import type { RecordedProcess } from './process/process-host';
import type { SecretSource } from './util/secret-source';

/** What is stored for a run: the record plus what crash recovery needs to find its processes. */
export interface StoredRun extends Omit<RunRecord, 'source'> {
  /** Where it came from (absent on records stored before it was: `sourceOf` reads those). */
  source?: RunSource;
  /** Its process, as its placement's host recorded it (process/process-host.ts). */
  process?: RecordedProcess;
  /** The JSON Schema its answer must match, on records stored before `spec` was (`spec.outputSchema` since). */
  outputSchema?: Record<string, unknown>;
  /** Where it was placed (runs/placement.ts), recorded with its process: what `release` undoes when it ends. */
  placement?: PlacementRecord | EarlierPlacementRecord;
  /** The instance that runs it, or delivers its webhooks (new at every start of the service): its owner in a fleet. */
  bootId: string;
  /** Where its webhooks go. */
  webhookTargets?: WebhookTarget[];
  /** The agent's own session id, once it printed one: recovery settles the Session from it. */
  agentSessionId?: string;
  /**
   * Its outbox: the webhook deliveries its state changes owe, written in the same record as the
   * change that owes them (the transactional outbox, in one write).
   */
  deliveries?: Delivery[];
  /** The earliest next attempt of a pending delivery, absent when none is pending: what the dispatcher looks up. */
  deliveryDueAt?: number;
  /** While `queued`: what starting it needs, removed by the write that starts it (the prompt is stored only this long). */
  queued?: QueuedStart;
}

/** Where a run was placed (runs/placement.ts), as recorded on it. */
export interface PlacementRecord {
  /** The provider that placed it (what its `isolation` named). */
  provider: string;
  /** The run's working directory. */
  cwd: string;
  /** The provider's own: a worktree's `WorktreeRecord` (worktrees/worktree-placement.ts). */
  data?: unknown;
}

/** A placement as records written before providers were named hold it (runs/placements.ts `placementOf` reads it). */
export interface EarlierPlacementRecord {
  cwd: string;
  worktree?: WorktreeRecord;
}

/** A run's git worktree, as recorded on it: what settling and releasing it need, here or after a restart. */
export interface WorktreeRecord {
  /** The workspace's repository (its top folder). */
  repo: string;
  /** The worktree's folder. */
  path: string;
  branch: string;
  /** The commit the run started from. */
  base: string;
  /** This run made the branch (else it continued its Session's). */
  created: boolean;
  /** What the setup command left untracked (`.env`, an install): never committed as the run's work. */
  setupFiles?: string[];
  cleanup: WorktreeCleanup;
}

/** When a run's worktree folder is removed as it ends: when it changed nothing, always (its branch keeps the work), or never. */
export type WorktreeCleanup = 'if-unchanged' | 'always' | 'never';

/** What a queued run needs to start later, on whichever instance takes it. */
export interface QueuedStart {
  prompt: string;
  /** It resumes a Session that existed before (else its Session was made for it). */
  resumes: boolean;
  /** Starts only once this run has ended (a schedule's `overlap: "queue"`). */
  after?: string;
  /** `HEADLESS_API_URL` for the run, as the accepting request saw it. */
  apiUrl: string;
  expiresAt: string;
  /** The caller's W3C `traceparent`, for the run's span when it starts. */
  traceparent?: string;
  /** Its source's runs at once (a trigger's `limits.concurrent`): it waits while that many run here. */
  share?: SlotShare;
}

/** A source's cap on its runs at once, held by admission on each instance. */
export interface SlotShare {
  key: string;
  running: number;
}

/** Where a start comes from, beyond its request: one shape for every path that starts a run (the API, the queue, schedules). */
export interface RunOrigin {
  /** @default { kind: 'api' } */
  source?: RunSource;
  /** Queue it behind this run until that one has ended. */
  after?: string;
  /** Its schedule's or trigger's run defaults, over the workspace's (runs/run-spec.ts). */
  run?: RunSpec;
  /** The caller's W3C `traceparent` (docs/deployment.md: Traces). */
  traceparent?: string;
  /** At capacity, wait in the queue even where none is configured (a trigger's burst). */
  queueWhenBusy?: boolean;
  /** The schedule's or trigger's own daily limits. */
  limits?: DailyLimits;
  /**
   * Its source's share of the run slots and the queue (a trigger's `limits.concurrent` and
   * `limits.queued`; defaults: half the slots, a quarter of the queue), so one burst leaves room
   * for other callers (docs/triggers.md: Limits).
   */
  share?: { key: string; running?: number; queued?: number };
  /** Its trigger's reply, posted when it ends: where to, and the endpoint it is posted to. */
  reply?: { url: string; address: ReplyAddress };
}

/** A queue for starts that find every slot busy (docs/queue-and-schedules.md). */
export interface QueueSettings {
  /** Queued runs at most (per workspace when set on a workspace); beyond, `429 queue_full`. @default 100 */
  max?: number;
  /** A run still queued this long after it was accepted ends `expired`. @default 3600000 */
  ttlMs?: number;
}

/** One webhook delivery of a run: to one target, for one event. */
export interface Delivery {
  /** The target's place in the run's `webhookTargets`. */
  target: number;
  event: WebhookEvent;
  /** What it is about when a run owes several of one event: the question's id (`permission.requested`). */
  subject?: string;
  /** The question, as it was asked: its payload. */
  approval?: ApprovalRecord;
  /** When the event happened: the payload's timestamp. */
  at: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  nextAttemptAt: number | null;
  lastStatus?: number;
  lastError?: string;
  deliveredAt?: string;
}

export interface SessionState {
  resumeId: string;
  workspaceId: string;
  agent: string;
  /** The agent's own session id; never shown by the API. */
  agentSessionId?: string;
  retired: boolean;
  createdAt: string;
  lastRunAt: string;
  runCount: number;
}

/** A workspace the service can run agents in. */
export interface Workspace {
  /** Matches `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`. */
  id: string;
  /** Absolute path: the run's working directory. */
  path: string;
  /** Display tag; never used to address the workspace. */
  tag?: string;
  /** Enabled agents. Absent: every registered agent. */
  agents?: string[];
  /** The fixed headless agent. */
  headlessAgent?: string;
  /** The legacy workspace default agent. */
  defaultAgent?: string;
  /** Added to every run's environment. */
  env?: Record<string, string>;
  /** Told when each run ends (docs/webhooks.md). */
  webhook?: WorkspaceWebhook;
  /** This workspace's queue, over the installation's; `false`: none here. @default the installation's */
  queue?: QueueSettings | false;
  /** What its sandboxed agents may reach besides the service: `host:port` entries (its model API); `["*"]`: the host's network. @default [] */
  network?: string[];
  /**
   * Its runs' defaults (docs/configuration.md: The run spec): permissions, approvals, sandbox,
   * isolation, ref, timeout, budget, guards, outputSchema, title, metadata. A schedule or trigger
   * sets its own over them, and a start over both (tightening only what confines or caps).
   */
  run?: WorkspaceRunSpec;
  /** How its runs' worktrees are made and removed. */
  worktree?: WorktreeSettings;
  /** Where its runs' branches are pushed and pull requests opened, when their spec asks (docs/worktrees.md: Publishing). */
  publishTo?: PublishSettings;
  /** Its runs per day and spend per day (UTC): a start beyond is `429 daily_limit_reached`. @default none */
  limits?: DailyLimits;
  /**
   * What a member of a fleet must have to run it (`gpu`, `mac`): only members started with every one
   * of these labels run its agents; the others accept its starts and queue them for those
   * (docs/deployment.md: Workers). @default none: any member that has it runs it
   */
  labels?: string[];
}

/** A workspace's run defaults: the run spec but its agent (a workspace chooses by `headlessAgent` and `defaultAgent`). */
export type WorkspaceRunSpec = Omit<RunSpec, 'agent'>;

/** A scope's limits per UTC day (a workspace, a schedule, a trigger); spend is the `usage.costUsd` its ended runs reported. */
export interface DailyLimits {
  runsPerDay?: number;
  spendPerDayUsd?: number;
}

/** A workspace's worktree settings (docs/worktrees.md). */
export interface WorktreeSettings {
  /** A shell command run in each new worktree before its agent (copy `.env`, install); it fails the run if it fails. */
  setup?: string;
  /** @default 600000 */
  setupTimeoutMs?: number;
  /** @default "if-unchanged" */
  cleanup?: WorktreeCleanup;
}

/**
 * Where a workspace's runs are published (docs/worktrees.md: Publishing): the operator's alone.
 * The token is read by the service as it publishes, and never reaches a run.
 */
export interface PublishSettings {
  /** The remote's URL (`https://`, `http://`), or the absolute path of a repository on this host; never a remote's name, nor a URL with a credential in it. */
  remote: string;
  /** The credential of an HTTP(S) remote's push and of the forge's API: the value, an environment variable or a file. */
  token?: SecretSource;
  /** The push's user name, beside the token (GitLab: `oauth2`). @default "x-access-token" */
  username?: string;
  /** The forge pull requests are opened on. */
  forge?: ForgeSettings;
  /** A start may ask for a push or a pull request its workspace's, schedule's or trigger's `run.publish` does not. @default false */
  fromStarts?: boolean;
  /** The status page's public address: a pull request links to `<statusUrl>#<taskId>`. @default the run's API URL */
  statusUrl?: string;
}

export interface ForgeSettings {
  kind: 'github' | 'gitlab';
  /** GitHub: `owner/name`; GitLab: the project's path (`group/project`) or id. */
  repository: string;
  /** GitHub Enterprise (`https://ghe.example.com/api/v3`), a self-hosted GitLab (`https://gitlab.example.com/api/v4`). @default the public one's */
  apiUrl?: string;
}

export type { SecretSource };

/** Where a run's webhooks go; kept on the run record from its start. */
export interface WebhookTarget {
  url: string;
  events: WebhookEvent[];
  /**
   * `workspace`: the workspace's own webhook (signed with its secret, if it has one); `start`: the
   * start request's; `reply`: its trigger's reply to where the delivery came from (`reply` says where).
   */
  source: 'workspace' | 'start' | 'reply';
  reply?: ReplyAddress;
}

/** Where a trigger's reply goes (docs/triggers.md: Replies): never a credential, only the place. */
export type ReplyAddress =
  /** `chat.postMessage` in the thread of the message that mentioned the app. */
  | { to: 'slack-thread'; channel: string; threadTs: string }
  /** A slash command's `response_url`: `url` is it. */
  | { to: 'slack-response' }
  /** A comment on the Linear issue (GraphQL `commentCreate`). */
  | { to: 'linear-issue'; issueId: string };

/** A workspace's webhook, from the config file or the library option. */
export interface WorkspaceWebhook {
  url: string;
  /** `whsec_…`. @default the installation's `webhooks.secret` */
  secret?: string;
  /** @default ["run.ended"] */
  events?: WebhookEvent[];
}
