/** The records the service stores and shows. */
import type { WebhookDeliveryView, WebhookTarget, WorkspaceWebhook } from './webhooks';

export const RUN_STATUSES = ['running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** The types of a run's events (README: Run events). */
export const RUN_EVENT_TYPES = ['run.started', 'agent.session', 'message', 'tool', 'usage', 'error', 'run.ended'] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];

/** The events a webhook can be told of. */
export const WEBHOOK_EVENTS = ['run.ended', 'agent.session'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface RunError {
  code: string;
  message: string;
}

/** The run record: process status only, never the prompt, output or a token. */
export interface RunRecord {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  mode: 'async' | 'sync';
  status: RunStatus;
  createdAt: string;
  endedAt: string | null;
  durationMs: number | null;
  timeoutMs: number;
  exitCode: number | null;
  signal: string | null;
  error?: RunError;
  /** Tokens (and cost) the agent reported for the run, where it reports them. */
  usage?: RunUsage;
  /** The agent's final assistant text, where it prints it (at most 4000 characters). */
  lastMessage?: string;
  /** Its webhook deliveries (on `GET /api/headless/:taskId` of a run that has webhooks). */
  webhooks?: WebhookDeliveryView[];
}

export interface RunUsage {
  inputTokens: number;
  outputTokens: number;
  /** In US dollars, where the agent reports it. */
  costUsd?: number;
}

/** What is stored for a run: the record plus what crash recovery needs to find its processes. */
export interface StoredRun extends RunRecord {
  process?: {
    pid: number;
    /** Process start time from /proc, so a reused pid is never signalled. */
    startTime?: string;
    /** The machine it runs on (host name and kernel boot id): its pid means nothing elsewhere. */
    machine?: string;
  };
  /** The instance that runs it (new at every start of the service): its owner in a fleet. */
  bootId: string;
  /** Where its webhooks go. */
  webhookTargets?: WebhookTarget[];
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
  /** Told when each run ends (README: Webhooks). */
  webhook?: WorkspaceWebhook;
}
