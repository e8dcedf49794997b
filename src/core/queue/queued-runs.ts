import { type RunError, hasEnded } from '../../contract/records';
import { owe } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import { publicRecord } from '../public-record';
import type { RunResult } from '../runs/live-run';
import type { RunRecords } from '../runs/records';
import type { ServiceObserver } from '../telemetry/observer';
import type { StoredRun } from '../types';
import type { QueuePolicy } from './queue-policy';

export interface QueuedRunsDeps {
  records: RunRecords;
  events: RunEvents;
  webhooks: Webhooks;
  observe: ServiceObserver;
  log: Log;
  instanceId: string;
}

/** How a queued run ends without ever starting. */
const ENDINGS = {
  cancelled: { code: 'cancelled', message: 'Cancelled while queued; its agent never started.' },
  expired: { code: 'expired', message: 'Still queued when its time in the queue ran out; its agent never started.' },
} as const;

type Waiter = { resolve: (result: RunResult) => void; done: Promise<RunResult> };
const EMPTY_OUTPUT = { stdout: '', stderr: '', truncated: false };
/** How often a caller waiting for a queued run that another instance took reads its record. */
const WAIT_POLL_MS = 1000;

/**
 * The queued runs (docs/queue-and-schedules.md), each a record in the store, in the one-write
 * design: accepted is one write of a `queued` record (holding what starting it needs), taken is
 * one compare-and-set to `running` by the instance that starts it, and cancelled or expired is one
 * compare-and-set to its final record with the `run.ended` deliveries it owes. The order is the
 * records' sortable ids; nothing about the queue lives only in memory.
 */
export class QueuedRuns {
  /** Callers of this instance waiting (`wait: true`) for a queued run to end. */
  private readonly waiters = new Map<string, Waiter>();

  constructor(private readonly $: QueuedRunsDeps) {}

  /** The queued runs, oldest first. */
  ids(): Promise<string[]> {
    return this.$.records.inStatus('queued');
  }

  /** The queued runs that count against `policy.max` (at most `max + 1` are counted). */
  async count(policy: QueuePolicy, workspaceId: string): Promise<number> {
    if (policy.scope === 'installation') return (await this.ids()).length;
    return (await this.$.records.page(workspaceId, 'queued', policy.max + 1)).ids.length;
  }

  /** Its place in the queue (1: next), or undefined once it has left it. */
  async position(taskId: string): Promise<number | undefined> {
    const index = (await this.ids()).indexOf(taskId);
    return index === -1 ? undefined : index + 1;
  }

  /** The one write that accepts it; its timeline starts with `run.queued`. */
  async enqueue(record: StoredRun): Promise<void> {
    await this.$.records.add(record);
    const { taskId, resumeId, workspaceId, agent, mode, title, metadata, schedule } = record;
    const data = { taskId, resumeId, workspaceId, agent, mode, expiresAt: record.queued!.expiresAt, ...(schedule === undefined ? {} : { schedule }) };
    await this.$.events
      .queued({ ...data, ...(title === undefined ? {} : { title }), ...(metadata === undefined ? {} : { metadata }) })
      .catch((error: unknown) => this.$.log(`could not store the events of ${taskId}`, error));
  }

  /** Takes it out of the queue for this instance to run: one compare-and-set; undefined if another change came first. */
  async take(taskId: string): Promise<StoredRun | undefined> {
    const startedAt = new Date().toISOString();
    const taken = await this.$.records.update(taskId, (r) => {
      if (r.status !== 'queued') return undefined;
      const { queued: _queued, ...rest } = r;
      return { ...rest, status: 'running', bootId: this.$.instanceId, startedAt };
    });
    return taken?.status === 'running' && taken.bootId === this.$.instanceId && taken.startedAt === startedAt ? taken : undefined;
  }

  /**
   * Ends it without starting it (cancelled, expired, or failed: it can never start, e.g. its
   * Session was retired): one compare-and-set; undefined if it had left the queue.
   */
  async end(taskId: string, ending: keyof typeof ENDINGS | { status: 'failed'; error: RunError }): Promise<StoredRun | undefined> {
    const { status, error } = typeof ending === 'string' ? { status: ending, error: ENDINGS[ending] } : ending;
    const endedAt = new Date();
    const final = await this.$.records.update(taskId, (r) => {
      if (r.status !== 'queued') return undefined;
      const { queued: _queued, ...rest } = r;
      const durationMs = Math.max(0, endedAt.getTime() - Date.parse(r.createdAt));
      const fields = { status, endedAt: endedAt.toISOString(), durationMs, error, bootId: this.$.instanceId };
      return owe({ ...rest, ...fields }, 'run.ended', fields.endedAt);
    });
    if (final?.status !== status || final.bootId !== this.$.instanceId || final.endedAt !== endedAt.toISOString()) return undefined;
    await this.announce(final);
    return final;
  }

  /** The final record is durable: its webhooks, timeline end and waiters are told. */
  private async announce(final: StoredRun): Promise<void> {
    this.$.webhooks.schedule(final);
    await this.$.events.endStored(publicRecord(final)).catch((error: unknown) => this.$.log(`could not end the events of ${final.taskId}`, error));
    this.$.observe.runEnded(final);
    this.settle(final.taskId, { record: publicRecord(final), output: EMPTY_OUTPUT });
  }

  /**
   * Settles when the queued run ends: told at once when it ends here, else (another instance of a
   * fleet took it) seen in its record, read every WAIT_POLL_MS.
   */
  waitFor(taskId: string): Promise<RunResult> {
    const known = this.waiters.get(taskId);
    if (known) return known.done;
    let resolve!: (result: RunResult) => void;
    const done = new Promise<RunResult>((ok) => {
      resolve = ok;
    });
    this.waiters.set(taskId, { resolve, done });
    const poll = setInterval(() => void this.poll(taskId), WAIT_POLL_MS);
    void done.finally(() => clearInterval(poll));
    return done;
  }

  private async poll(taskId: string): Promise<void> {
    const record = await this.$.records.find(taskId).catch(() => undefined);
    if (!record || !hasEnded(record.status) || record.bootId === this.$.instanceId) return;
    this.settle(taskId, { record: publicRecord(record), output: (await this.$.records.output(taskId).catch(() => undefined)) ?? EMPTY_OUTPUT });
  }

  /** Tells whoever waits for it. */
  settle(taskId: string, result: RunResult): void {
    this.waiters.get(taskId)?.resolve(result);
    this.waiters.delete(taskId);
  }
}
