import { MACHINE } from '../fleet/fleet';
import { reapEarlierRun } from '../process/process-tree';
import type { RunEvents } from '../events/run-events';
import type { Webhooks } from '../delivery/webhooks';
import { INTERRUPTED } from './outcome';
import { type RunRecords, publicRecord } from './records';
import type { StoredRun } from '../types';

/**
 * Takes over the runs of instances that are gone (README: Crash recovery): at start-up those an
 * earlier boot left `running`, and in a fleet those of an instance whose lease ran out. Each
 * becomes `interrupted` after what is left of its processes is killed (where they ran on this
 * machine), its timeline ends and its webhooks are queued. It is never re-run. Each step may be
 * done twice (a sweeper that dies midway is followed by another) without doing anything twice.
 * Returns how many were interrupted.
 */
export async function takeOverRuns({ records, events, webhooks, log, isGone, isLive }: {
  records: RunRecords;
  events: RunEvents;
  webhooks: Webhooks;
  log: (message: string, error?: unknown) => void;
  /** Whether a run's owner is gone; asked after the candidates are read. */
  isGone: (owner: string | undefined) => Promise<boolean>;
  /** Whether this instance runs it. */
  isLive: (taskId: string) => boolean;
}): Promise<number> {
  const candidates = await records.loadRunning();
  let count = 0;
  for (const run of candidates) {
    if (isLive(run.taskId) || !(await isGone(run.bootId))) continue;
    // A pid means something only on the machine that recorded it (records older than fleets say none).
    if (run.process?.machine === undefined || run.process.machine === MACHINE) reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
    const now = new Date();
    const final: StoredRun = {
      ...run,
      status: 'interrupted',
      endedAt: now.toISOString(),
      durationMs: Math.max(0, now.getTime() - Date.parse(run.createdAt)),
      error: INTERRUPTED,
    };
    // Its webhooks are queued and its timeline ended before the record ends, so a crash here loses neither.
    await webhooks.enqueue(final, 'run.ended', publicRecord(final));
    await events.endStored(publicRecord(final)).catch((error: unknown) => log(`could not end the events of ${run.taskId}`, error));
    await records.replaceOrphan(final);
    count++;
  }
  return count;
}
