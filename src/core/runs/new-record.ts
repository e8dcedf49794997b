import type { RunEventData } from '../../contract/events';
import type { StartRequest } from '../../contract/requests';
import type { StoredRun, WebhookTarget } from '../types';

/** What a run's `run.started` event says: who runs where, and its label, if it has one. */
export function startedEvent(a: { taskId: string; resumeId: string; workspaceId: string; agent: string; request: StartRequest }): RunEventData['run.started'] {
  const { title, metadata, wait } = a.request;
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    mode: wait ? 'sync' : 'async',
    ...(title === undefined ? {} : { title }),
    ...(metadata === undefined || Object.keys(metadata).length === 0 ? {} : { metadata }),
  };
}

/** The `running` record of an admitted run, as it is first stored. */
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
}): StoredRun {
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    mode: a.request.wait ? 'sync' : 'async',
    status: 'running',
    createdAt: a.now,
    endedAt: null,
    durationMs: null,
    timeoutMs: a.request.timeoutMs,
    exitCode: null,
    signal: null,
    bootId: a.owner,
    ...(a.request.title === undefined ? {} : { title: a.request.title }),
    ...(a.request.metadata === undefined || Object.keys(a.request.metadata).length === 0 ? {} : { metadata: a.request.metadata }),
    ...(a.webhookTargets.length > 0 ? { webhookTargets: a.webhookTargets } : {}),
  };
}
