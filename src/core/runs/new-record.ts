import type { RunEventData } from '../../contract/events';
import type { RunBudget, RunPolicy, RunSource } from '../../contract/records';
import { sourceOf } from '../public-record';
import type { StartRequest } from '../../contract/requests';
import type { QueuedStart, StoredRun, WebhookTarget } from '../types';

/** What a run's `run.started` event says: who runs where, and its label, if it has one. */
export function startedEvent(a: {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  request: Pick<StartRequest, 'title' | 'metadata' | 'wait'>;
  source: RunSource;
}): RunEventData['run.started'] {
  const { title, metadata, wait } = a.request;
  const schedule = a.source.kind === 'schedule' ? a.source.name : undefined;
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    mode: wait ? 'sync' : 'async',
    ...(schedule === undefined ? {} : { schedule }),
    ...(title === undefined ? {} : { title }),
    ...(metadata === undefined || Object.keys(metadata).length === 0 ? {} : { metadata }),
  };
}

/** The `running` record of an admitted run (or the `queued` one of a queued run), as it is first stored. */
export function newRunRecord(a: {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  request: StartRequest;
  /** The instance that runs it. */
  owner: string;
  webhookTargets: WebhookTarget[];
  now: string;
  /** Queued: what starting it later needs. */
  queued?: QueuedStart;
  /** Where it came from. */
  source: RunSource;
  /** Its confinement, if any. */
  policy?: RunPolicy;
}): StoredRun {
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    mode: a.request.wait ? 'sync' : 'async',
    status: a.queued ? 'queued' : 'running',
    createdAt: a.now,
    endedAt: null,
    durationMs: null,
    timeoutMs: a.request.timeoutMs,
    exitCode: null,
    signal: null,
    bootId: a.owner,
    source: a.source,
    ...(a.policy === undefined ? {} : { policy: a.policy }),
    ...budgetOf(a.request),
    ...(a.request.outputSchema === undefined ? {} : { outputSchema: a.request.outputSchema }),
    ...(a.request.title === undefined ? {} : { title: a.request.title }),
    ...(a.request.metadata === undefined || Object.keys(a.request.metadata).length === 0 ? {} : { metadata: a.request.metadata }),
    ...(a.webhookTargets.length > 0 ? { webhookTargets: a.webhookTargets } : {}),
    ...(a.queued ? { queued: a.queued } : {}),
  };
}

/** The `run.started` event of a stored record (a queued run's, as it starts). */
export function startedEventOf(run: StoredRun): RunEventData['run.started'] {
  return startedEvent({ ...run, source: sourceOf(run), request: { wait: run.mode === 'sync', title: run.title, metadata: run.metadata } });
}

/** The `run.queued` event of a queued record. */
export function queuedEventOf(run: StoredRun & { queued: QueuedStart }): RunEventData['run.queued'] {
  return { ...startedEventOf(run), expiresAt: run.queued.expiresAt };
}

/** The budget a start asked for, if any. */
function budgetOf(request: StartRequest): { budget?: RunBudget } {
  const { maxTurns, maxTokens, maxCostUsd } = request;
  const budget: RunBudget = {
    ...(maxTurns === undefined ? {} : { maxTurns }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(maxCostUsd === undefined ? {} : { maxCostUsd }),
  };
  return Object.keys(budget).length > 0 ? { budget } : {};
}
