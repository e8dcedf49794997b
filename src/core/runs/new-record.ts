import type { StartRequest } from '../../contract/requests';
import type { StoredRun, WebhookTarget } from '../types';

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
    ...(a.webhookTargets.length > 0 ? { webhookTargets: a.webhookTargets } : {}),
  };
}
