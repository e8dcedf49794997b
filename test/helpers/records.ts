import type { StoredRun } from '../../src/core/types';

/** A stored run record as the service writes one: `running` by default, owned by `boot_1`; `more` overrides any field. */
export function storedRun(taskId: string, more: Partial<StoredRun> = {}): StoredRun {
  return {
    taskId,
    resumeId: `ses_${taskId}`,
    workspaceId: 'ws',
    agent: 'fake',
    mode: 'async',
    status: 'running',
    createdAt: new Date().toISOString(),
    endedAt: null,
    durationMs: null,
    timeoutMs: 1000,
    exitCode: null,
    signal: null,
    bootId: 'boot_1',
    ...more,
  };
}
