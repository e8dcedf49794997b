import { reapEarlierRun } from './process-tree';
import type { RunEvents } from './run-events';
import type { Webhooks } from './webhooks';
import { INTERRUPTED } from './run-outcome';
import { type RunRecords, publicRecord } from './run-records';
import type { StoredRun } from './types';

/**
 * Crash recovery, at start-up: indexes every stored run, and each one still `running` (its
 * service stopped or crashed) becomes `interrupted` after what is left of its processes is
 * killed, its event timeline ends and its webhooks are queued. It is never re-run. Returns how many were interrupted.
 */
export async function recoverRuns({ records, events, webhooks, log }: {
  records: RunRecords;
  events: RunEvents;
  webhooks: Webhooks;
  log: (message: string, error?: unknown) => void;
}): Promise<number> {
  const orphans = await records.loadRunning();
  const now = new Date();
  for (const run of orphans) {
    reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
    const final: StoredRun = {
      ...run,
      status: 'interrupted',
      endedAt: now.toISOString(),
      durationMs: Math.max(0, now.getTime() - Date.parse(run.createdAt)),
      error: INTERRUPTED,
    };
    // Its webhooks are queued before the record ends, so a crash here cannot lose them.
    await webhooks.enqueue(final, 'run.ended', publicRecord(final));
    await records.replaceOrphan(final);
    // Its timeline ends too, so a reader following it is told how it ended.
    await events.endStored(publicRecord(final)).catch((error: unknown) => log(`could not end the events of ${run.taskId}`, error));
  }
  return orphans.length;
}
