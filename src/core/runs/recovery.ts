/**
 * @module Takes over the runs of instances that are gone (docs/reliability.md): at start-up those
 * an earlier boot left `running`, and in a fleet those of an instance whose lease ran out.
 */
import type { ApprovalAnswer, RunApprovals } from '../../contract/records';
import type { ProcessHost } from '../process/process-host';
import type { SessionBook } from '../sessions';
import type { StoredRun } from '../types';
import { placementOf } from './placements';
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
  /** The host of a run's processes: its placement's (runs/placements.ts). */
  hostOf: (run: StoredRun) => ProcessHost;
  /** A question's stored answer, if it has one. */
  answerOf: (approvalId: string) => Promise<ApprovalAnswer | null | undefined>;
}

/**
 * In a fleet the run is first claimed (one write makes this instance its owner), because its old
 * owner may only be cut off, not dead: once the claim is stored, that owner can no longer write
 * what it saw of the process being killed. What is left of its processes is reaped by its
 * placement's host (the local host: where they ran on this machine), its Session settled from the record, then ONE write makes it
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
    await reap(o, run);
    await o.sessions
      .noteAgentSessionId(run.resumeId, run.agentSessionId)
      .catch((error: unknown) => o.log(`could not settle the Session of ${run.taskId}`, error));
    if (await o.lifecycle.interrupt(run.taskId, o.shared ? o.instanceId : gone, await answeredQuestions(o, run))) count++;
  }
  return count;
}

/** Asks the run's host to reap what it left; one that still runs after (another user's, a host that failed) is logged. */
async function reap(o: TakeOverInput, run: StoredRun): Promise<void> {
  const host = o.hostOf(run);
  const hosted = { taskId: run.taskId, ...(run.process ? { process: run.process } : {}), ...(run.placement ? { data: placementOf(run.placement).data } : {}) };
  try {
    await host.reap(hosted);
    if (await host.alive(hosted)) o.log(`the process of ${run.taskId} still runs after it was reaped`);
  } catch (error) {
    o.log(`could not reap what ${run.taskId} left`, error);
  }
}

/**
 * Its questions' summary with the answers given before the crash counted: a question answered
 * (its `200` told a caller) whose run died before its agent took the answer reads answered on the
 * record too, not pending. Unanswered ones stay named (their questions are `interrupted`).
 */
async function answeredQuestions(o: TakeOverInput, run: StoredRun): Promise<RunApprovals | undefined> {
  const summary = run.approvals;
  if (!summary || summary.pending.length === 0) return undefined;
  const next: RunApprovals = { ...summary, pending: [] };
  for (const id of summary.pending) {
    const answer = await o.answerOf(id).catch((error: unknown) => o.log(`could not read the answer of ${id}`, error));
    if (!answer) {
      next.pending.push(id);
      continue;
    }
    if (answer.decision === 'allow') next.allowed += 1;
    else next.denied += 1;
    if (answer.by === 'fallback') next.timedOut += 1;
  }
  return next.pending.length === summary.pending.length ? undefined : next;
}
