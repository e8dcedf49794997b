/**
 * @module Takes over the runs of instances that are gone (docs/reliability.md): at start-up those
 * an earlier boot left `running`, and in a fleet those of an instance whose lease ran out.
 */
import { MACHINE } from '../process/machine';
import { reapEarlierRun } from '../process/process-tree';
import type { SessionBook } from '../sessions';
import type { RunLifecycle } from './lifecycle';
import type { RunRecords } from './records';

export interface TakeOverInput {
  records: RunRecords;
  lifecycle: RunLifecycle;
  sessions: SessionBook;
  log: (message: string, error?: unknown) => void;
  /** Whether a run's owner is gone; asked after the candidates are read. */
  isGone: (owner: string | undefined) => Promise<boolean>;
  instanceId: string;
  /** Other instances share the store: claim before killing. */
  shared: boolean;
}

/**
 * In a fleet the run is first claimed (one write makes this instance its owner), because its old
 * owner may only be cut off, not dead: once the claim is stored, that owner can no longer write
 * what it saw of the process being killed. What is left of its processes is killed (where they
 * ran on this machine), its Session settled from the record, then ONE write makes it
 * `interrupted` with its `run.ended` deliveries, and the lifecycle's one ended path tells
 * everyone. It is never re-run. A run this instance is taking or running is never a candidate,
 * however long its launch takes; one it claimed but could not end (a refused write) is its own to
 * end. A sweeper that dies midway is followed by another that does nothing twice (a claimed run's
 * owner is the dead sweeper). Returns how many were interrupted.
 */
export async function takeOverRuns(o: TakeOverInput): Promise<number> {
  let count = 0;
  for (const run of await o.records.loadRunning()) {
    if (o.lifecycle.isHere(run.taskId) || (run.bootId !== o.instanceId && !(await o.isGone(run.bootId)))) continue;
    const gone = run.bootId;
    if (o.shared && gone !== o.instanceId && !(await o.lifecycle.claim(run.taskId, gone))) continue;
    // A pid means something only on the machine that recorded it; with none recorded, its marker still finds what it left.
    if (run.process === undefined || run.process.machine === MACHINE) reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
    await o.sessions
      .noteAgentSessionId(run.resumeId, run.agentSessionId)
      .catch((error: unknown) => o.log(`could not settle the Session of ${run.taskId}`, error));
    if (await o.lifecycle.interrupt(run.taskId, o.shared ? o.instanceId : gone)) count++;
  }
  return count;
}
