import { RUN_STATUSES, type RunStatus } from '../../contract/records';
import type { AnswerV1, Once } from '../idempotency';
import type { StoredRun } from '../types';

/** What a schedule's firing or a trigger's delivery keeps under its idempotency key: the run it made, and its status then. */
export interface KeptStart {
  taskId: string;
  status: RunStatus;
}

export const keptOf = (run: Pick<StoredRun, 'taskId' | 'status'>): KeptStart => ({ taskId: run.taskId, status: run.status });

/**
 * An ingress's start as an idempotent operation: `execute` starts the run; a start cut off before
 * its answer was kept is answered from its run; a refusal that recorded its run keeps that run
 * (only `spawn_failed` names one: its run was recorded `failed`).
 */
export function keptStart(execute: (taskId: string) => Promise<KeptStart>, runs: { find(taskId: string): Promise<StoredRun | undefined> }): Once<KeptStart> {
  return {
    execute,
    replay: async (taskId) => {
      const run = await runs.find(taskId);
      return run && keptOf(run);
    },
    refused: (_refusal, taskId) => ({ taskId, status: 'failed' }),
    fromV1: keptStartOfV1,
  };
}

/**
 * A start kept before version 2, as the HTTP answer it was made into: a `202` whose body named the
 * run and its status, or a refusal's problem JSON naming its run (its `status` the HTTP one).
 */
function keptStartOfV1({ status, body }: AnswerV1): KeptStart | undefined {
  const kept = body as { taskId?: unknown; status?: unknown } | null;
  if (typeof kept?.taskId !== 'string') return undefined;
  const run = RUN_STATUSES.find((s) => s === kept.status);
  return { taskId: kept.taskId, status: status === 202 && run !== undefined ? run : 'failed' };
}
