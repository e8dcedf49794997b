import type { ScheduleDefinition } from './schedules/schedule-spec';
import type { SecretSource, TriggerDefinition } from './triggers/trigger-spec';
import type { Tracer } from '@opentelemetry/api';
import type { Keyv } from 'keyv';
import type { CommandAgentDefinition } from './agents/command-agent';
import type { TokenPrice } from './agents/prices';
import type { AgentAdapter } from './agents/types';
import type { WebhookOptions } from './delivery/targets';
import type { Authorize } from './http/auth';
import type { Spawner } from './process/spawner';
import type { HeadlessLogger } from './logger';
import type { HeadlessStore } from './store/headless-store';
import type { QueueSettings, Workspace } from './types';
import type { TurnPolicy } from './runs/turn-policy';
import type { PlacementProvider } from './runs/placement';
import type { WorkspaceResolver } from './workspaces';

export interface HeadlessHandlerOptions {
  /** The workspaces runs may target: a list, or a resolver called with a validated id. */
  workspaces: Workspace[] | WorkspaceResolver;
  /** Custom agents, beside the built-ins: config-style command agents or full adapters. @default {} */
  agents?: Record<string, CommandAgentDefinition | AgentAdapter>;
  /**
   * Where runs, Sessions and the Inbox live: `createSqliteStore(dir)`, `createPostgresStore(url)`,
   * a `HeadlessStore` of the host's own, or any Keyv (wrapped; its record lookups kept in memory). @default in memory
   */
  store?: HeadlessStore | Keyv;
  /** Starts agent processes. @default createExecaSpawner() */
  spawner?: Spawner;
  /** Replaces the default gate (docs/security.md). @default the loopback/admin-token gate */
  authorize?: Authorize;
  /** Admin token for non-local callers (default gate only); at least 32 characters. Never shown to runs. @default none */
  adminToken?: string;
  /**
   * Whether local callers need no credential (`trusted`, the spec's rule) or the admin token like
   * everyone (`token`: a host shared with other users, or a proxy on this host). Default gate only. @default "trusted"
   */
  localCallers?: 'trusted' | 'token';
  /**
   * This instance's labels (`gpu`, `mac`): in a fleet it runs the workspaces whose `labels` it has
   * every one of, and queues the others' starts for members that do (docs/deployment.md: Workers). @default []
   */
  labels?: string[];
  /** Runs allowed at once on this host, sync runs included. @default 4 */
  maxConcurrentRuns?: number;
  /** A run that prints nothing on stdout for this long is stopped `timed_out` with `stalled`; a workspace may set its own. @default none */
  stallTimeoutMs?: number;
  /** A run whose processes hold more resident memory is stopped `failed` with `memory_limit`; a workspace may set its own. @default none */
  maxMemoryMb?: number;
  /** Below this much available memory no run starts: starts wait in the queue (or get `429`). @default none */
  minFreeMemoryMb?: number;
  /** Queue starts that find every slot busy, instead of `429` (docs/queue-and-schedules.md); a workspace may set its own. @default none */
  queue?: QueueSettings;
  /**
   * What sandboxed runs (a workspace's or schedule's `sandbox: true`) must not see, besides every
   * other listed workspace: the daemon passes its data directory, config file, token file and socket.
   * `readable`: what every sandbox may read besides the system, its PATH and its agent's install.
   * `agentState`: where each workspace's sandboxed agents keep their state (the daemon: `<data dir>/agent-state`;
   * otherwise a temporary folder, so sessions of sandboxed runs last until close).
   * `user`: under a root service, the host uid and gid sandboxed agents run as (never 0; default 65532:65532).
   * @default {}
   */
  sandbox?: { hidden?: string[]; readable?: string[]; agentState?: string; user?: { uid: number; gid: number } };
  /**
   * US dollars per million tokens, by agent name, for agents that report tokens but no cost: their
   * runs' cost is estimated from these (for budgets and daily spend). @default agents/prices.ts: codex and gemini
   */
  prices?: Record<string, TokenPrice>;
  /**
   * What follows when a run's agent ends a turn, asked after the built-ins (the structured-output
   * repair turn), in order: another turn on the same session, the run's end, or no opinion
   * (docs/library.md: Turn policies). @default []
   */
  turnPolicies?: TurnPolicy[];
  /**
   * Where runs' agents run, beside the built-ins (`worktree`, then `none`: the workspace's own
   * folder): a run's `isolation` names its provider, the first of that name, so one named `worktree`
   * or `none` takes the built-in's place. Each provider's host answers for its runs' processes
   * (docs/library.md: Placements). @default []
   */
  placements?: PlacementProvider[];
  /** The folder runs' git worktrees are made in, a folder per workspace (docs/worktrees.md); never inside a workspace. Give each instance its own: the start-up sweep removes what a crash left there. @default the daemon: `<data dir>/worktrees` (with any store); otherwise a new folder in the temporary folder at each start, which no sweep reads */
  worktreeRoot?: string;
  /** Senders' webhooks that start runs: Alertmanager, Grafana, GitHub, GitLab, Sentry, PagerDuty… (docs/triggers.md). @default [] */
  triggers?: TriggerDefinition[];
  /** Cron schedules that start runs (docs/queue-and-schedules.md). @default [] */
  schedules?: ScheduleDefinition[];
  /** The installation default agent. @default none */
  defaultAgent?: string;
  /** Extra Host names accepted by the default gate (behind a TLS proxy). @default [] */
  publicHosts?: string[];
  /** Path prefix the handler is mounted under, e.g. `/agents`. @default "" */
  basePath?: string;
  /** Base URL given to runs as `HEADLESS_API_URL`. @default the request's origin plus the mount path */
  apiUrl?: string;
  /**
   * The operator's named secrets, which a start may give its run by name (`"secrets": { "NPM_TOKEN": { "secret": "npm" } }`);
   * no run sees them otherwise, not even through `env` (docs/security.md: Per-run secrets). @default none
   */
  secrets?: Record<string, SecretSource>;
  /** Environment runs start from (never the service's own secrets: runs/env.ts). @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Completion webhooks: the signing secret, per-start URLs, private targets, retries (docs/webhooks.md). @default none */
  webhooks?: WebhookOptions;
  /** Ended runs, Inbox items, Sessions and expired idempotency keys older than this many days are deleted, hourly; 0 keeps everything. @default 30 */
  retentionDays?: number;
  /**
   * With a PostgreSQL store shared by several instances: how long an instance's lease lasts; its
   * runs are taken over this long after it dies (docs/deployment.md: Running several instances). @default 15000
   */
  instanceLeaseMs?: number;
  /** How often an idle event stream sends a keep-alive (docs/http-api.md: Follow a run). @default 15000 */
  heartbeatMs?: number;
  /** An OpenTelemetry tracer: a span per run, with its tool calls (docs/deployment.md: Traces). @default none: no traces */
  tracer?: Tracer;
  /**
   * Where the service logs (a pino logger fits): a line per run start and end, webhook give-ups,
   * retention passes, and the errors it handled. @default errors and warnings on stderr only
   */
  logger?: HeadlessLogger;
}
