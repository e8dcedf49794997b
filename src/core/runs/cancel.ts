import { Refusal } from '../../contract/problems';
import type { RunRecord } from '../../contract/records';
import type { Fleet } from '../fleet/fleet';
import { publicRecord } from '../public-record';
import type { StoredRun } from '../types';

/** Cancels a run this instance does not run: the instance that runs it is asked (docs/deployment.md: Running several instances). */
export async function cancelElsewhere(
  o: { find(taskId: string): Promise<StoredRun | undefined>; fleet: Fleet; instanceId: string },
  taskId: string,
): Promise<RunRecord> {
  const stored = await o.find(taskId);
  if (!stored) throw new Refusal('run_not_found', `No run "${taskId}".`);
  if (stored.status !== 'running' || stored.bootId === o.instanceId) throw new Refusal('run_not_running', `Run "${taskId}" has already ended.`);
  const answer = await o.fleet.ask(stored.bootId, { op: 'cancel', taskId });
  if (answer.ok) return publicRecord(stored);
  // No answer: the owner may have died and its run been taken over meanwhile.
  if (answer.code === 'run_owner_unreachable' && (await o.find(taskId))?.status !== 'running') {
    throw new Refusal('run_not_running', `Run "${taskId}" has already ended.`);
  }
  throw new Refusal(answer.code, answer.message, answer.code === 'run_owner_unreachable' ? { retryAfterSeconds: 5 } : {});
}
