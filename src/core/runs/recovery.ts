import { owe } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import { MACHINE } from '../process/machine';
import { reapEarlierRun } from '../process/process-tree';
import { publicRecord } from '../public-record';
import type { SessionBook } from '../sessions';
import type { StoredRun } from '../types';
import { INTERRUPTED } from './outcome';
import type { RunRecords } from './records';

/**
 * Takes over the runs of instances that are gone (docs/reliability.md): at start-up those an
 * earlier boot left `running`, and in a fleet those of an instance whose lease ran out. In a
 * fleet the run is first claimed (one write makes this instance its owner), because its old owner
 * may only be cut off, not dead: once the claim is stored, that owner can no longer write what it
 * saw of the process being killed. What is left of its processes is killed (where they ran on
 * this machine), then ONE write makes it `interrupted` with its `run.ended` deliveries; only then
 * are its webhooks scheduled, its Session settled and its timeline ended, so all of them say what
 * the record says. It is never re-run. A sweeper that dies midway is followed by another that
 * does nothing twice (a claimed run's owner is the dead sweeper). Returns how many were interrupted.
 */
export async function takeOverRuns(o: {
  records: RunRecords;
  events: RunEvents;
  webhooks: Webhooks;
  sessions: SessionBook;
  log: (message: string, error?: unknown) => void;
  /** Whether a run's owner is gone; asked after the candidates are read. */
  isGone: (owner: string | undefined) => Promise<boolean>;
  /** Whether this instance runs it. */
  isLive: (taskId: string) => boolean;
  instanceId: string;
  /** Other instances share the store: claim before killing. */
  shared: boolean;
}): Promise<number> {
  let count = 0;
  for (const run of await o.records.loadRunning()) {
    // One this instance claimed but could not end yet (a refused write) is its own to end.
    if (o.isLive(run.taskId) || (run.bootId !== o.instanceId && !(await o.isGone(run.bootId)))) continue;
    const gone = run.bootId;
    const mine = (r: StoredRun, owner: string | undefined) => r.status === 'running' && r.bootId === owner;
    if (o.shared) {
      const claimed = await o.records.update(run.taskId, (r) => (mine(r, gone) ? { ...r, bootId: o.instanceId } : undefined));
      if (!claimed || !mine(claimed, o.instanceId)) continue;
    }
    // A pid means something only on the machine that recorded it; with none recorded, its marker still finds what it left.
    if (run.process === undefined || run.process.machine === MACHINE) reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
    const owner = o.shared ? o.instanceId : gone;
    const final = await o.records.update(run.taskId, (r) => (mine(r, owner) ? interrupted(r, o.instanceId) : undefined));
    if (final?.status !== 'interrupted' || final.bootId !== o.instanceId) continue;
    o.webhooks.schedule(final);
    await o.sessions
      .noteAgentSessionId(final.resumeId, final.agentSessionId)
      .catch((error: unknown) => o.log(`could not settle the Session of ${run.taskId}`, error));
    await o.events.endStored(publicRecord(final)).catch((error: unknown) => o.log(`could not end the events of ${run.taskId}`, error));
    count++;
  }
  return count;
}

function interrupted(run: StoredRun, owner: string): StoredRun {
  const now = new Date();
  const endedAt = now.toISOString();
  const final: StoredRun = {
    ...run,
    status: 'interrupted',
    endedAt,
    durationMs: Math.max(0, now.getTime() - Date.parse(run.createdAt)),
    error: INTERRUPTED,
    bootId: owner,
  };
  return owe(final, 'run.ended', endedAt);
}
