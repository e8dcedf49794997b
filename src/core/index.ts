export { createHeadlessHandler } from './handler';
export type { HeadlessHandler, HeadlessHandlerOptions, HeadlessServerContext, WorkspaceResolver } from './handler';
export { createDefaultGate, isLoopbackAddress } from './http/auth';
export type { AuthContext, Authorize, Credential, GateOptions } from './http/auth';
export type { RunTokenGrant } from './runs/tokens';
export type { HeadlessLogger, Log } from './logger';
export type { ScheduleDefinition } from './schedules/schedule-spec';
export type { OnResolved, SecretSource, TriggerDefinition } from './triggers/trigger-spec';
export type { SenderName } from './triggers/senders';
export type { ReplySettings } from './triggers/reply-spec';
export type { VerifySettings } from './triggers/verification';
export type { When } from './triggers/when';
export { HttpProblem, Refusal, StorageError } from '../contract/problems';
export type { ProblemCode, RefusalOptions } from '../contract/problems';
export { createExecaSpawner, SpawnFailure } from './process/spawner';
export type { ExecaSpawnerOptions, ProcessExit, ProcessOutput, SpawnedProcess, SpawnOptions, Spawner } from './process/spawner';
export { createMemoryKeyv, createPostgresKeyv, createSqliteKeyv } from './store/keyvs';
export { createPostgresStore, createSqliteStore } from './store/sql-stores';
export type { CollectionSpec, HeadlessStore, RecordTable } from './store/headless-store';
export type { Page } from './store/memory-index';
export type { SqlDatabase, SqlQuery } from './store/sql-database';
export { BUILTIN_AGENTS } from './agents/builtins';
export { createCommandAgent } from './agents/command-agent';
export type { CommandAgentDefinition } from './agents/command-agent';
export type {
  AgentAdapter,
  AgentConversation,
  AgentCredentials,
  AgentEvent,
  AgentIO,
  AgentIdentity,
  AgentInvocation,
  AgentOutputParser,
  AgentProtocol,
  AgentRunInput,
  AgentVerdict,
  PermissionDecision,
  PermissionQuestion,
  ProtocolFacts,
} from './agents/types';
export type { ApprovalSettings } from './approvals/approval-policy';
export type {
  ApprovalAnswer,
  ApprovalPolicy,
  ApprovalRecord,
  ApprovalRule,
  ApprovalTool,
  ChangedFile,
  DeliveryOutcome,
  InboxItem,
  RunBudget,
  RunChanges,
  RunPublish,
  RunChangesView,
  RunApprovals,
  RunError,
  RunPolicy,
  RunRecord,
  RunSecret,
  RunSource,
  RunStatus,
  RunUsage,
  SessionView,
} from '../contract/records';
export type {
  DailyLimits,
  ForgeSettings,
  PlacementRecord,
  PublishSettings,
  QueueSettings,
  Workspace,
  WorkspaceRunSpec,
  WorktreeCleanup,
  WorktreeRecord,
  WorktreeSettings,
} from './types';
export { RUN_SPEC_KEYS, RunSpecSchema } from '../contract/run-spec';
export type { Permissions, RunSpec, RunSpecKey } from '../contract/run-spec';
export type { ResolvedSpec } from './runs/run-spec';
export type { TokenPrice } from './agents/prices';
export { MAX_TURNS } from './runs/turn-policy';
export type { TurnCommand, TurnCommandEnd, TurnContext, TurnDecision, TurnEnd, TurnEventType, TurnPolicy } from './runs/turn-policy';
export type { TurnNotes } from './runs/transitions';
export type { AgentRule, CheckResult, GraderVerdict, RunVerify, VerifyAttempt } from '../contract/records';
export type { GradeAnswer, GradeRequest } from './runs/grader';
export type { EndedRun, PlaceInput, Placed, PlacedSetup, PlacementProvider, ReleaseInput, RunPatch, SandboxView, Settled } from './runs/placement';
export { localHost } from './process/local-host';
export type { HostedRun, ProcessHost, RecordedProcess } from './process/process-host';
export { RUN_EVENT_TYPES, RUN_STATUSES, WEBHOOK_EVENTS } from '../contract/records';
export type { RunEventType, WebhookEvent } from '../contract/records';
export type { RunEvent, RunEventData } from '../contract/events';
export type { DeliveryState, WebhookDeliveryView } from '../contract/records';
export type { WebhookOptions } from './delivery/targets';
export type { WorkspaceWebhook } from './types';
