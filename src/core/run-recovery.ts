import { reapEarlierRun } from './process-tree';
import { INTERRUPTED } from './run-outcome';
import type { RunRecords } from './run-records';
import type { StoredRun } from './types';

/**
 * Crash recovery, at start-up: indexes every stored run, and each one still `running` (its
 * service stopped or crashed) becomes `interrupted` after what is left of its processes is
 * killed. It is never re-run. Returns how many were interrupted.
 */
export async function recoverRuns(records: RunRecords): Promise<number> {
  const orphans: StoredRun[] = [];
  for await (const run of records.loadAll()) if (run.status === 'running') orphans.push(run);
  const now = new Date();
  for (const run of orphans) {
    reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
    await records.replaceOrphan({
      ...run,
      status: 'interrupted',
      endedAt: now.toISOString(),
      durationMs: Math.max(0, now.getTime() - Date.parse(run.createdAt)),
      error: INTERRUPTED,
    });
  }
  return orphans.length;
}
