import { StorageError } from '../../contract/problems';
import { owe } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { ProcessOutput } from '../process/spawner';
import { publicRecord } from '../public-record';
import type { SessionBook } from '../sessions';
import type { Log } from '../logger';
import type { ServiceObserver } from '../telemetry/observer';
import type { StoredRun } from '../types';
import { type EndInput, finalChange, settleSession } from './ending';
import type { LiveRun } from './live-run';
import type { RunRecords } from './records';
import type { RunTokens } from './tokens';

/** How long, and how often, a run another instance took over is read until it has ended. */
const TAKEN_OVER_WAIT_MS = 60_000;
const TAKEN_OVER_POLL_MS = 250;

export interface RunEndingDeps {
  records: RunRecords;
  sessions: SessionBook;
  tokens: RunTokens;
  webhooks: Webhooks;
  events: RunEvents;
  log: Log;
  observe: ServiceObserver;
  /** The run no longer runs here. */
  forget(taskId: string): void;
}

/**
 * The state changes of a running run after its start, each ONE write of its record: the agent's
 * session (with the agent.session deliveries it owes) and the end (the final record with its
 * run.ended deliveries). Nothing is announced before the write that says it is durable.
 */
export class RunEnding {
  constructor(private readonly $: RunEndingDeps) {}

  /** The agent printed its session id: one write records it with the agent.session deliveries it owes. */
  noteSession(live: LiveRun, agentSessionId: string): void {
    const { taskId } = live;
    const at = new Date().toISOString();
    this.$.events.append(taskId, 'agent.session', { resumeId: live.reservation.resumeId });
    void this.$.records
      .update(taskId, (r) => (r.status === 'running' ? owe({ ...r, agentSessionId }, 'agent.session', at) : undefined))
      .then(async (run) => {
        // The Session follows the record (recovery settles it from the record too), then the webhooks go.
        await this.$.sessions.noteAgentSessionId(live.reservation.resumeId, agentSessionId);
        if (run) this.$.webhooks.schedule(run);
      })
      .catch((error: unknown) => this.$.log(`could not record the agent session of ${taskId}`, error));
  }

  /** Judges the outcome, releases the reservation and stores the final record; announces it once durable. Runs once per run. */
  async finalize(live: LiveRun, end: EndInput): Promise<void> {
    live.ending = true;
    const { taskId, reservation } = live;
    const record = this.$.records.current(taskId)!;
    const { fields, failedUnanswered, agentSessionId } = finalChange({ live, end, record, log: this.$.log });
    await settleSession(this.$.sessions, record.resumeId, failedUnanswered ? { reset: live.resumedFrom } : { note: agentSessionId });
    this.$.tokens.revoke(taskId);
    await reservation.release();
    await live.processSaved?.catch(() => undefined);
    // Only while this instance owns it: one that took it over (this one was cut off) ends it.
    const change = (r: StoredRun) => (r.status === 'running' && r.bootId === record.bootId ? owe({ ...r, ...fields }, 'run.ended', fields.endedAt) : undefined);
    const stored = (final: StoredRun) => (final.status === 'running' ? this.takenOver(live, end.output) : this.announce(live, final, end.output));
    const inTime = await this.$.records.finish(taskId, change, stored);
    if (!inTime) live.reject(new StorageError(`the final record of ${taskId} could not be stored yet; it is retried`));
  }

  /**
   * Another instance took the run over (this one's lease ran out) and is ending it: its final
   * record is awaited, then told here too, to this instance's waiters and followers.
   */
  private async takenOver(live: LiveRun, output: ProcessOutput): Promise<void> {
    for (let waited = 0; waited < TAKEN_OVER_WAIT_MS; waited += TAKEN_OVER_POLL_MS) {
      await new Promise((resolve) => setTimeout(resolve, TAKEN_OVER_POLL_MS));
      const final = await this.$.records.find(live.taskId).catch(() => undefined);
      if (final && final.status !== 'running') return this.announce(live, final, output);
    }
    this.$.log(`${live.taskId} was taken over by another instance, which has not ended it yet`);
    this.$.records.untrack(live.taskId);
    this.$.forget(live.taskId);
    live.reject(new StorageError(`${live.taskId} was taken over by another instance`));
  }

  /** The final record is durable: now its output, timeline end, webhooks and waiters are told. */
  private async announce(live: LiveRun, final: StoredRun, output: ProcessOutput): Promise<void> {
    await this.$.records.saveOutput(live.taskId, output);
    this.$.webhooks.schedule(final);
    await this.$.events.end(publicRecord(final));
    this.$.records.untrack(live.taskId);
    this.$.forget(live.taskId);
    this.$.observe.runEnded(final);
    live.resolve({ record: publicRecord(final), output });
  }
}
