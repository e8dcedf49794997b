import { HttpProblem, problemAnswer } from '../../contract/problems';
import { type RunRecord, hasEnded } from '../../contract/records';
import type { Once } from '../idempotency';
import type { RunService } from '../runs/run-service';
import type { HttpAnswer } from './router';

/** A run's `Location` header. */
type LocationOf = (taskId: string) => Record<string, string>;

/** The `202` of a start: the run's ids and status, and its place if it was queued. */
export const accepted = (r: RunRecord) => ({
  taskId: r.taskId,
  resumeId: r.resumeId,
  status: r.status,
  ...(r.queuePosition === undefined ? {} : { queuePosition: r.queuePosition }),
});

/**
 * A start under an `Idempotency-Key` (docs/http-api.md: Idempotent starts): its key keeps the HTTP
 * answer itself (status, body, `Location`), replayed as it was; a refusal that recorded its run
 * (`500 spawn_failed`) keeps its problem JSON; a start cut off before its answer was kept is
 * answered from its run. Entries kept before version 2 hold the same answer.
 */
export function idempotentStart(execute: (taskId: string) => Promise<HttpAnswer>, runs: Pick<RunService, 'result'>, location: LocationOf): Once<HttpAnswer> {
  return {
    execute,
    replay: (taskId) => fromRun(runs, taskId, location),
    refused: (refusal) => problemAnswer(refusal),
    fromV1: (answer) => answer,
  };
}

/** The answer a start cut off before it was answered would have had, from its run. */
async function fromRun(runs: Pick<RunService, 'result'>, taskId: string, location: LocationOf): Promise<HttpAnswer | undefined> {
  const result = await runs.result(taskId);
  if (!result) return undefined;
  const { record, output } = result;
  if (record.mode === 'async') return { status: 202, body: accepted(record), headers: location(taskId) };
  if (hasEnded(record.status)) return { status: 200, body: { ...record, output: output ?? { stdout: '', stderr: '', truncated: false } }, headers: {} };
  const still = new HttpProblem('idempotency_key_in_use', `The run this Idempotency-Key started, "${taskId}", has not ended yet; retry once it has.`, {
    extra: { taskId },
  });
  const refused = problemAnswer(still);
  return { ...refused, headers: { ...refused.headers, ...location(taskId) } };
}
