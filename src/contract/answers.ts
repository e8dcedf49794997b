import * as v from 'valibot';
import {
  AGENT_RULES,
  APPROVAL_STATUSES,
  type ApprovalRecord,
  DELIVERY_OUTCOMES,
  type InboxItem,
  RUN_EVENT_TYPES,
  RUN_STATUSES,
  type RunRecord,
  type SessionView,
  WEBHOOK_EVENTS,
} from './records';
import type { WebhookDeliveryView } from './records';
import { RunSpecEntries } from './run-spec';

/**
 * The answers of the API as valibot schemas: the OpenAPI document is generated from these and
 * the request schemas, and the typed client checks what it receives against them. Each one is
 * held to its TypeScript type at compile time (the `exact` checks below), so they cannot drift.
 */

const nullableString = v.nullable(v.string());
const nullableNumber = v.nullable(v.number());

export const RunUsageSchema = v.object({
  inputTokens: v.number(),
  outputTokens: v.number(),
  costUsd: v.optional(v.number()),
  costEstimated: v.optional(v.boolean()),
});

export const RunErrorSchema = v.object({ code: v.string(), message: v.string() });

export const WebhookDeliverySchema = v.object({
  id: nullableString,
  url: v.string(),
  event: v.picklist(WEBHOOK_EVENTS),
  state: v.picklist(['waiting', 'pending', 'delivered', 'failed']),
  attempts: v.number(),
  nextAttemptAt: nullableString,
  lastStatus: v.optional(v.number()),
  lastError: v.optional(v.string()),
  deliveredAt: v.optional(v.string()),
});

const CheckResultSchema = v.object({
  name: v.string(),
  exitCode: nullableNumber,
  passed: v.boolean(),
  durationMs: v.number(),
  timedOut: v.optional(v.literal(true)),
  output: v.string(),
});

export const RunVerifySchema = v.object({
  verdict: v.picklist(['pending', 'passed', 'failed', 'stalled']),
  attempts: v.array(
    v.object({
      attempt: v.number(),
      passed: v.boolean(),
      checks: v.array(CheckResultSchema),
      grader: v.optional(v.object({ taskId: v.string(), verdict: v.picklist(['pass', 'fail']), failedCriteria: v.array(v.string()), explanation: v.string() })),
      at: v.string(),
    }),
  ),
});

export const RunChangesSchema = v.object({
  branch: v.string(),
  base: v.string(),
  head: v.string(),
  committed: v.boolean(),
  files: v.array(v.object({ path: v.string(), status: v.picklist(['added', 'modified', 'deleted', 'renamed']), from: v.optional(v.string()) })),
  filesTruncated: v.optional(v.boolean()),
  notCommitted: v.optional(v.string()),
  worktree: nullableString,
});

export const RunPublishSchema = v.object({
  pushed: v.optional(v.object({ remote: v.string(), branch: v.string(), sha: v.string() })),
  pullRequest: v.optional(v.object({ url: v.string(), number: v.number(), draft: v.boolean(), existing: v.optional(v.boolean()) })),
  skipped: v.optional(v.string()),
  error: v.optional(RunErrorSchema),
});

const ApprovalPolicySchema = v.object({
  timeoutMs: v.number(),
  fallback: v.picklist(['allow', 'deny']),
  rules: v.optional(
    v.array(v.object({ kinds: v.optional(v.array(v.string())), paths: v.optional(v.array(v.string())), answer: v.picklist(['allow', 'deny']) })),
  ),
});

export const ApprovalAnswerSchema = v.object({
  decision: v.picklist(['allow', 'deny']),
  scope: v.picklist(['once', 'run']),
  by: v.picklist(['caller', 'fallback']),
  at: v.string(),
});

export const ApprovalSchema = v.pipe(
  v.object({
    id: v.string(),
    taskId: v.string(),
    resumeId: v.string(),
    workspaceId: v.string(),
    agent: v.string(),
    status: v.picklist(APPROVAL_STATUSES),
    tool: v.object({
      title: v.string(),
      kind: v.optional(v.string()),
      input: v.optional(v.string()),
      paths: v.array(v.string()),
      canAlways: v.boolean(),
      truncated: v.optional(v.literal(true)),
    }),
    createdAt: v.string(),
    expiresAt: v.string(),
    fallback: v.picklist(['allow', 'deny']),
    answer: v.nullable(ApprovalAnswerSchema),
  }),
  v.description('A permission an agent asked for under `permissions: "ask"` (docs/approvals.md).'),
);

export const RunRecordSchema = v.pipe(
  v.object({
    taskId: v.string(),
    resumeId: v.string(),
    workspaceId: v.string(),
    agent: v.string(),
    agentChosenBy: v.optional(v.picklist(AGENT_RULES)),
    secrets: v.optional(v.array(v.object({ name: v.string(), secret: v.optional(v.string()) }))),
    mode: v.picklist(['async', 'sync']),
    status: v.picklist(RUN_STATUSES),
    queuePosition: v.optional(v.number()),
    startedAt: v.optional(v.string()),
    source: v.variant('kind', [
      v.object({ kind: v.literal('api') }),
      v.object({ kind: v.literal('schedule'), name: v.string(), scheduledFor: v.string() }),
      v.object({ kind: v.literal('trigger'), name: v.string(), delivery: v.string(), deliveryId: v.optional(v.string()) }),
    ]),
    schedule: v.optional(v.string()),
    scheduledFor: v.optional(v.string()),
    createdAt: v.string(),
    endedAt: nullableString,
    durationMs: nullableNumber,
    timeoutMs: v.number(),
    exitCode: nullableNumber,
    signal: nullableString,
    spec: v.optional(v.object(RunSpecEntries)),
    policy: v.optional(
      v.object({
        permissions: v.picklist(['full', 'read-only', 'ask']),
        approvals: v.optional(ApprovalPolicySchema),
        sandbox: v.boolean(),
        isolation: v.optional(v.string()),
        worktree: v.optional(v.object({ ref: v.string() })),
      }),
    ),
    budget: v.optional(v.object({ maxTurns: v.optional(v.number()), maxTokens: v.optional(v.number()), maxCostUsd: v.optional(v.number()) })),
    title: v.optional(v.string()),
    metadata: v.optional(v.record(v.string(), v.string())),
    error: v.optional(RunErrorSchema),
    usage: v.optional(RunUsageSchema),
    lastMessage: v.optional(v.string()),
    result: v.optional(v.unknown()),
    approvals: v.optional(v.object({ asked: v.number(), allowed: v.number(), denied: v.number(), timedOut: v.number(), pending: v.array(v.string()) })),
    verify: v.optional(RunVerifySchema),
    changes: v.optional(RunChangesSchema),
    publish: v.optional(RunPublishSchema),
    webhooks: v.optional(v.array(WebhookDeliverySchema)),
  }),
  v.description('A run: process status only, never the prompt, output or a token.'),
);

export const ProcessOutputSchema = v.object({ stdout: v.string(), stderr: v.string(), truncated: v.boolean() });

export const StartAcceptedSchema = v.object({
  taskId: v.string(),
  resumeId: v.string(),
  status: v.picklist(['running', 'queued']),
  queuePosition: v.optional(v.number()),
});

export const SyncResultSchema = v.object({ ...RunRecordSchema.entries, output: ProcessOutputSchema });

export const RunListSchema = v.object({ runs: v.array(RunRecordSchema), nextCursor: nullableString });

export const RunOutputSchema = v.object({
  taskId: v.string(),
  status: v.picklist(RUN_STATUSES),
  ...ProcessOutputSchema.entries,
  retained: v.boolean(),
});

export const RunEventSchema = v.pipe(
  v.object({ seq: v.number(), time: v.string(), type: v.picklist(RUN_EVENT_TYPES), data: v.record(v.string(), v.unknown()) }),
  v.description('One event of a run (docs/http-api.md: Follow a run); `data` depends on `type`.'),
);

export const EventPageSchema = v.object({
  taskId: v.string(),
  events: v.array(RunEventSchema),
  ended: v.boolean(),
  nextAfter: nullableNumber,
});

export const SessionViewSchema = v.object({
  resumeId: v.string(),
  workspaceId: v.string(),
  agent: v.string(),
  status: v.picklist(['idle', 'busy', 'retired']),
  createdAt: v.string(),
  lastRunAt: v.string(),
  runCount: v.number(),
  resumable: v.boolean(),
});

export const InboxItemSchema = v.object({
  id: v.string(),
  workspaceId: v.string(),
  taskId: nullableString,
  resumeId: nullableString,
  title: v.string(),
  body: v.string(),
  createdAt: v.string(),
  readAt: nullableString,
});

export const InboxListSchema = v.object({ items: v.array(InboxItemSchema), nextCursor: nullableString });

export const HealthSchema = v.object({ status: v.picklist(['ok', 'ready']) });

export const VersionSchema = v.object({ version: v.string() });

export const WorkspaceListSchema = v.object({ workspaces: v.array(v.object({ id: v.string(), tag: v.optional(v.string()) })) });

export const AgentsReportSchema = v.object({
  workspaces: v.array(
    v.object({ workspaceId: v.string(), agents: v.array(v.record(v.string(), v.unknown())), problems: v.array(v.string()), warnings: v.array(v.string()) }),
  ),
});

export const ProblemSchema = v.pipe(
  v.object({ type: v.string(), title: v.string(), status: v.number(), detail: v.string(), code: v.string() }),
  v.description('RFC 9457 problem details; `code` names the error (docs/http-api.md: Errors).'),
);

const DailyLimitsSchema = v.object({ runsPerDay: v.optional(v.number()), spendPerDayUsd: v.optional(v.number()) });

/** What some runs used: `estimatedCostUsd` is the part of `costUsd` estimated from their token counts (`usage.costEstimated`). */
export const UsageFiguresSchema = v.object({
  runs: v.number(),
  inputTokens: v.number(),
  outputTokens: v.number(),
  costUsd: v.number(),
  estimatedCostUsd: v.number(),
});

const byName = v.record(v.string(), UsageFiguresSchema);
const scopeLimits = v.record(v.string(), v.object({ workspaceId: v.string(), ...DailyLimitsSchema.entries }));

/** `GET /api/usage`: per UTC day (today first), totals and breakdowns; the daily limits in force beside. */
export const UsageReportSchema = v.object({
  days: v.array(v.object({ day: v.string(), total: UsageFiguresSchema, workspaces: byName, agents: byName, schedules: byName, triggers: byName })),
  limits: v.object({ workspaces: v.record(v.string(), DailyLimitsSchema), schedules: scopeLimits, triggers: scopeLimits }),
});

/** Every answer schema by name: the OpenAPI document's components, and what the routes and the client refer to. */
/** A follow-up taken: it goes to the agent at its next turn. */
export const MessageAcceptedSchema = v.object({ taskId: v.string(), messageId: v.string(), pending: v.optional(v.number()) });

export const ANSWERS = {
  RunRecord: RunRecordSchema,
  MessageAccepted: MessageAcceptedSchema,
  StartAccepted: StartAcceptedSchema,
  SyncResult: SyncResultSchema,
  RunList: RunListSchema,
  RunOutput: RunOutputSchema,
  ResultAccepted: v.object({ taskId: v.string(), accepted: v.literal(true) }),
  Approval: ApprovalSchema,
  ApprovalList: v.object({ approvals: v.array(ApprovalSchema), nextCursor: nullableString }),
  WorkspaceUsage: v.object({
    workspaceId: v.string(),
    day: v.string(),
    runs: v.number(),
    spendUsd: v.number(),
    limits: DailyLimitsSchema,
    schedules: v.record(v.string(), v.object({ runs: v.number(), spendUsd: v.number() })),
    triggers: v.record(v.string(), v.object({ runs: v.number(), spendUsd: v.number() })),
  }),
  UsageReport: UsageReportSchema,
  RunChanges: v.object({ taskId: v.string(), changes: RunChangesSchema, patch: v.string(), patchTruncated: v.boolean() }),
  RunEvent: RunEventSchema,
  EventPage: EventPageSchema,
  SessionView: SessionViewSchema,
  InboxItem: InboxItemSchema,
  InboxList: InboxListSchema,
  AgentsReport: AgentsReportSchema,
  WorkspaceList: WorkspaceListSchema,
  Health: HealthSchema,
  Version: VersionSchema,
  Problem: ProblemSchema,
  TriggerList: v.object({
    triggers: v.array(
      v.object({
        name: v.string(),
        workspace: v.string(),
        sender: v.string(),
        verify: v.string(),
        enabled: v.boolean(),
        agent: v.optional(v.string()),
        warnings: v.optional(v.array(v.string())),
      }),
    ),
  }),
  DeliveryAccepted: v.object({
    outcome: v.picklist(DELIVERY_OUTCOMES),
    delivery: v.string(),
    taskId: v.optional(v.string()),
    reason: v.optional(v.string()),
  }),
  DeliveryList: v.object({
    deliveries: v.array(
      v.object({
        id: v.string(),
        trigger: v.string(),
        receivedAt: v.string(),
        outcome: v.picklist(DELIVERY_OUTCOMES),
        reason: v.optional(v.string()),
        event: v.optional(v.string()),
        status: v.optional(v.picklist(['firing', 'resolved'])),
        deliveryId: v.optional(v.string()),
        taskId: v.optional(v.string()),
      }),
    ),
    nextCursor: v.nullable(v.string()),
    /** Deliveries that failed verification: counted and sampled in memory on this instance, never logged one by one. */
    unverified: v.object({
      count: v.number(),
      since: v.string(),
      recent: v.array(v.object({ receivedAt: v.string(), peer: v.optional(v.string()) })),
    }),
  }),
  ScheduleList: v.object({
    schedules: v.array(
      v.object({
        name: v.string(),
        workspaceId: v.string(),
        cron: v.string(),
        timezone: v.string(),
        overlap: v.picklist(['skip', 'queue', 'allow']),
        missed: v.picklist(['skip', 'once']),
        nextRunAt: nullableString,
        lastOccurrence: nullableString,
        lastRun: v.nullable(v.object({ taskId: v.string(), status: v.picklist(RUN_STATUSES) })),
      }),
    ),
  }),
} as const;

// Compile-time: each schema's output is exactly the type the service answers with.
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const exact = <T extends true>(): T | undefined => undefined;
exact<Exact<v.InferOutput<typeof RunRecordSchema>, RunRecord>>();
exact<Exact<v.InferOutput<typeof SessionViewSchema>, SessionView>>();
exact<Exact<v.InferOutput<typeof InboxItemSchema>, InboxItem>>();
exact<Exact<v.InferOutput<typeof ApprovalSchema>, ApprovalRecord>>();
exact<Exact<v.InferOutput<typeof WebhookDeliverySchema>, WebhookDeliveryView>>();
