/**
 * @module How a run whose agent ran here ends: its outcome judged from the process and the agent's
 * verdict, its Session settled and its reservation released, then the final record written
 * through the lifecycle (whose one "ended" path tells everyone once it is durable). Also the one
 * state change between start and end: the agent's session id.
 */
import { outputSchemaOf } from './new-record';
import { StorageError } from '../../contract/problems';
import { redactValue } from './run-secrets';
import type { RunError } from '../../contract/records';
import { type TokenPrice, priced } from '../agents/prices';
import { higherUsage } from '../agents/reported-usage';
import type { AgentVerdict } from '../agents/types';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import type { ProcessOutput } from '../process/spawner';
import type { SessionBook } from '../sessions';
import type { StoredRun } from '../types';
import { clip } from '../util/text';
import { EMPTY_OUTPUT, type RunLifecycle } from './lifecycle';
import type { LiveRun } from './live-run';
import { placementRecord } from './placements';
import { publishRun } from '../worktrees/publish';
import { judgeOutcome } from './outcome';
import { answerOf } from './repair-turn';
import { judgeAnswer } from './structured-output';
import type { RunRecords } from './records';
import type { ProcessEnd } from './supervisor';
import type { RunTokens } from './tokens';
import type { FinishFields } from './transitions';

const LAST_MESSAGE_MAX = 4000;
/** How long, and how often, a run another instance took over is read until it has ended. */
const TAKEN_OVER_WAIT_MS = 60_000;
const TAKEN_OVER_POLL_MS = 250;

/** How a run's process ended, as the final record needs it. */
export interface EndInput {
  exitCode: number | null;
  signal: string | null;
  output: ProcessOutput;
  runtimeError?: RunError;
}

export const emptyEnd: EndInput = { exitCode: null, signal: null, output: EMPTY_OUTPUT };

export function processOutcome(end: ProcessEnd): EndInput {
  return {
    exitCode: end.exitCode,
    signal: end.signal,
    output: { stdout: end.stdout, stderr: end.stderr, truncated: end.truncated },
    ...(end.lost === undefined ? {} : { runtimeError: { code: 'process_lost', message: 'The service lost track of the agent process.' } }),
  };
}

export interface RunEndingResources {
  /** Token prices by agent, for the agents that report no cost. */
  prices: Record<string, TokenPrice>;
  lifecycle: RunLifecycle;
  events: RunEvents;
  records: RunRecords;
  sessions: SessionBook;
  tokens: RunTokens;
  log: Log;
  instanceId: string;
  /** The service's environment: where a publish token named by a variable is read. */
  baseEnv: NodeJS.ProcessEnv;
}

export class RunEnding {
  constructor(private readonly $: RunEndingResources) {}

  /** The agent printed its session id: one write records it with the agent.session deliveries it owes. */
  noteSession(live: LiveRun, agentSessionId: string): void {
    const { taskId } = live;
    const at = new Date().toISOString();
    const { resumeId } = live.reservation;
    this.$.events.append(taskId, 'agent.session', { resumeId });
    // The Session follows the record (recovery settles it from the record too), then the webhooks go.
    const noted = this.$.lifecycle
      .noteSession(taskId, this.$.instanceId, agentSessionId, at, () => this.$.sessions.noteAgentSessionId(resumeId, agentSessionId))
      .catch((error: unknown) => this.$.log(`could not record the agent session of ${taskId}`, error));
    live.sessionNoted = Promise.all([live.sessionNoted, noted]);
  }

  /** Judges the outcome, settles the Session, releases the reservation and stores the final record. Runs once per run. */
  async finalize(live: LiveRun, end: EndInput): Promise<void> {
    live.ending = true;
    const { taskId, reservation } = live;
    const record = this.$.records.current(taskId);
    if (!record) return;
    const reported = redactValue(live.verdict ?? this.verdictOf(live, end.exitCode), live.redact);
    const usage = this.usageOf(live, reported);
    const verdict = usage ? { ...reported, usage } : reported;
    const judged = structuredFields(record, live, finalFields(live, end, verdict), verdict);
    // A question still waiting ends with its run: `interrupted` with the service, else `abandoned`.
    await live.questions?.abandon(judged.status === 'interrupted' ? 'interrupted' : 'abandoned');
    const approvals = live.questions?.final();
    const placed = { ...judged, ...(approvals ? { approvals } : {}), ...(await this.placementFields(live, record)) };
    // Whatever the service built of what the agent said (its error read from stderr, cleaned) goes without the run's secrets.
    const fields = redactValue(await this.withPublish(live, record, placed), live.redact);
    // The agent failed before its model ever answered: its session may not exist.
    const failedUnanswered = fields.status === 'failed' && verdict.answered === false;
    const agentSessionId = verdict.agentSessionId ?? record.agentSessionId;
    // A note of the id still being written would land after the reset below (seen under load).
    await live.sessionNoted;
    await settleSession(this.$.sessions, record.resumeId, failedUnanswered ? { reset: live.resumedFrom } : { note: agentSessionId });
    this.$.tokens.revoke(taskId);
    await reservation.release();
    await live.processSaved?.catch(() => undefined);
    // Only while this instance owns it: one that took it over (this one was cut off) ends it.
    const ended = (stored: StoredRun, mine: boolean) =>
      stored.status === 'running' ? this.takenOver(live, end.output) : this.$.lifecycle.ended(stored, { output: end.output, here: mine });
    const inTime = await this.$.lifecycle.finish(taskId, record.bootId, fields, ended);
    if (!inTime) this.$.lifecycle.settle(taskId, new StorageError(`the final record of ${taskId} could not be stored yet; it is retried`));
  }

  /** Where the run was placed (when its process never started, its record does not say yet) and what it changed there. */
  private async placementFields(live: LiveRun, record: StoredRun): Promise<Pick<FinishFields, 'placement' | 'changes'>> {
    const placement = record.placement ?? (live.placed && placementRecord(live.placed));
    if (!placement) return {};
    const changes = await this.$.lifecycle.settlePlacement(live.taskId, placement);
    return { ...(record.placement ? {} : { placement }), ...(changes ? { changes } : {}) };
  }

  /** Its branch pushed and its pull request opened, where its spec asks (worktrees/publish.ts): before its final record, which says what became of them. */
  private async withPublish(live: LiveRun, record: StoredRun, fields: FinishFields): Promise<FinishFields> {
    const asked = record.spec?.publish;
    if (live.publishing === undefined || asked === undefined) return fields;
    const { workspacePath, settings, apiUrl } = live.publishing;
    const link = `${(settings.statusUrl ?? apiUrl).replace(/\/?$/, '/')}#${live.taskId}`;
    const run = { taskId: live.taskId, title: record.title, lastMessage: fields.lastMessage, verify: record.verify, link };
    const publish = await publishRun({
      workspacePath,
      settings,
      asked,
      status: fields.status,
      changes: fields.changes ?? record.changes,
      run,
      env: this.$.baseEnv,
    });
    if (publish.error) this.$.log(`run ${live.taskId} could not be published: ${publish.error.message}`);
    return { ...fields, publish };
  }

  /**
   * Another instance took the run over (this one's lease ran out) and is ending it: its final
   * record is awaited, then told here too, to this instance's waiters and followers.
   */
  private async takenOver(live: LiveRun, output: ProcessOutput): Promise<void> {
    for (let waited = 0; waited < TAKEN_OVER_WAIT_MS; waited += TAKEN_OVER_POLL_MS) {
      await new Promise((resolve) => setTimeout(resolve, TAKEN_OVER_POLL_MS));
      const final = await this.$.records.find(live.taskId).catch(() => undefined);
      if (final && final.status !== 'running') return this.$.lifecycle.ended(final, { output, here: false });
    }
    this.$.log(`${live.taskId} was taken over by another instance, which has not ended it yet`);
    this.$.records.untrack(live.taskId);
    this.$.lifecycle.settle(live.taskId, new StorageError(`${live.taskId} was taken over by another instance`));
  }

  /** A run's usage after `verdict`: never lower than what it reported as it ran, as a last report cannot undo the spend before it. */
  usageOf(live: LiveRun, verdict: AgentVerdict): LiveRun['usage'] {
    const price = this.$.prices[live.reservation.adapter.name];
    return verdict.usage ? higherUsage(live.usage, priced(verdict.usage, price)) : live.usage;
  }

  /** The conversation's verdict (none when the agent never started); one that throws (a custom adapter's) makes the run failed, never stuck. */
  verdictOf(live: LiveRun, exitCode: number | null): AgentVerdict {
    try {
      return live.conversation?.finish(exitCode) ?? {};
    } catch (error) {
      this.$.log(`the ${live.reservation.adapter.name} adapter could not judge ${live.taskId}`, error);
      return { error: 'the agent adapter could not read the output' };
    }
  }
}

/** The fields a run's final record sets, judged from its end and its agent's verdict. */
export function finalFields(live: Pick<LiveRun, 'process' | 'endedBy'>, end: EndInput, verdict: AgentVerdict): FinishFields {
  // The service's stop, else how the turn loop ended it (runs/turn-policy.ts).
  const stop = live.process?.stopped ?? live.endedBy;
  const outcome = judgeOutcome({
    exitCode: end.exitCode,
    signal: end.signal,
    stop,
    runtimeError: end.runtimeError,
    agentError: verdict.error,
    stderr: end.output.stderr,
  });
  // The agent stopped itself at a limit of its budget (claude's --max-turns): the error names it.
  const error =
    verdict.limit && outcome.status === 'failed' && !stop
      ? { code: 'budget_exceeded', message: `The agent stopped at its ${verdict.limit} limit: ${verdict.error ?? 'no reason given'}` }
      : outcome.error;
  return {
    status: outcome.status,
    exitCode: end.exitCode,
    signal: end.signal,
    ...(error ? { error } : {}),
    ...(verdict.usage ? { usage: verdict.usage } : {}),
    ...(verdict.lastMessage ? { lastMessage: clip(verdict.lastMessage, LAST_MESSAGE_MAX) } : {}),
  };
}

/**
 * A run with an `outputSchema`: its answer, when it matches, is its `result`; a run that would
 * have succeeded without one that matches has `failed` with `output_invalid` (or `output_missing`).
 */
function structuredFields(record: StoredRun, live: LiveRun, fields: FinishFields, verdict: AgentVerdict): FinishFields {
  const schema = outputSchemaOf(record);
  if (schema === undefined) return fields;
  const native = live.reservation.adapter.structuredOutput === 'native';
  const answer = answerOf(live, verdict, native);
  const judged = judgeAnswer(schema, answer);
  if ('value' in judged) return { ...fields, result: judged.value };
  if (fields.status !== 'succeeded') return fields;
  const code = answer === undefined ? 'output_missing' : 'output_invalid';
  return { ...fields, status: 'failed', error: { code, message: `The run's answer could not be used: ${judged.problem}.` } };
}

/**
 * Settles the Session as the run ends, before its record does, so whoever sees the run ended sees
 * its Session as it is now: a run that failed before its model answered leaves the agent session
 * id it had before (`reset`), any other notes the one it printed.
 */
export async function settleSession(sessions: SessionBook, resumeId: string, how: { reset: string | undefined } | { note: string | undefined }): Promise<void> {
  if ('reset' in how) await sessions.setAgentSessionId(resumeId, how.reset);
  else await sessions.noteAgentSessionId(resumeId, how.note);
}
