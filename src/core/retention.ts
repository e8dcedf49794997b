import { hasEnded } from '../contract/records';
import { setImmediate as yieldToRequests } from 'node:timers/promises';
import type { HeadlessLogger, Log } from './logger';
import type { IdempotencyKeys } from './idempotency';
import { sortableIdBound } from './util/ids';
import type { Inbox } from './inbox';
import type { Approvals } from './approvals/approvals';
import type { DeliveryLog } from './triggers/deliveries';
import type { RunEvents } from './events/run-events';
import type { RunRecords } from './runs/records';
import type { SessionBook } from './sessions';

/**
 * Retention (docs/configuration.md: Retention): ended runs (record with its outbox, output, events), Sessions
 * unused since, questions, and Inbox items older than the configured age are deleted, and expired idempotency keys, in small
 * batches that give way to requests between them. Candidates come from the list indexes,
 * whose ids sort by creation time, so a pass never scans what it keeps.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
const BATCH = 100;
const INTERVAL_MS = 60 * 60 * 1000;

export interface RetentionOptions {
  /** Age in days after which things are deleted; 0 keeps everything. */
  days: number;
  records: RunRecords;
  events: RunEvents;
  inbox: Inbox;
  sessions: SessionBook;
  idempotency: IdempotencyKeys;
  deliveries: DeliveryLog;
  approvals: Approvals;
  log: Log;
  logger: HeadlessLogger;
}

export interface Pruned {
  runs: number;
  inboxItems: number;
  sessions: number;
  idempotencyKeys: number;
  triggerDeliveries: number;
  /** Questions of runs under `permissions: "ask"` (docs/approvals.md). */
  approvals: number;
}

export class Retention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private closed = false;

  constructor(private readonly o: RetentionOptions) {}

  /** Prunes now, then every hour. */
  start(): void {
    if (this.o.days <= 0) return;
    const pass = () => {
      this.running = this.prune().then(
        (pruned) => {
          if (Object.values(pruned).some((n) => n > 0)) this.o.logger.info({ ...pruned, retentionDays: this.o.days }, 'retention pass deleted old entries');
        },
        (error: unknown) => this.o.log('retention pass failed', error),
      );
      void this.running.then(() => {
        if (!this.closed) this.timer = setTimeout(pass, INTERVAL_MS).unref();
      });
    };
    pass();
  }

  /** One pass: everything created before `now - days`. */
  async prune(now = Date.now()): Promise<Pruned> {
    const cutoff = now - this.o.days * DAY_MS;
    const pruned: Pruned = { runs: 0, inboxItems: 0, sessions: 0, idempotencyKeys: 0, triggerDeliveries: 0, approvals: 0 };
    const { records, events } = this.o;
    for (;;) {
      const batch = await records.oldest(sortableIdBound('run_', cutoff), BATCH);
      let deleted = 0;
      for (const id of batch) {
        if (this.closed) return pruned;
        const run = await records.find(id);
        // A run still running (only possible with a clock gone backwards) is kept.
        if (!run || !hasEnded(run.status)) continue;
        await events.forget(run.taskId);
        await records.forget(run);
        deleted++;
      }
      pruned.runs += deleted;
      if (batch.length < BATCH || deleted === 0) break;
      await yieldToRequests();
    }
    for (let n = BATCH; n === BATCH && !this.closed; ) {
      n = await this.o.inbox.prune(sortableIdBound('inb_', cutoff), BATCH);
      pruned.inboxItems += n;
      await yieldToRequests();
    }
    for (let n = BATCH; n === BATCH && !this.closed; ) {
      n = await this.o.deliveries.prune(sortableIdBound('dlv_', cutoff), BATCH);
      pruned.triggerDeliveries += n;
      await yieldToRequests();
    }
    for (let n = BATCH; n === BATCH && !this.closed; ) {
      n = await this.o.approvals.prune(sortableIdBound('apr_', cutoff), BATCH);
      pruned.approvals += n;
      await yieldToRequests();
    }
    // A Session whose last run is older than the runs kept goes with them (and one a crash left with no run at all).
    if (!this.closed) pruned.sessions = await this.o.sessions.prune(new Date(cutoff).toISOString());
    if (!this.closed) pruned.idempotencyKeys = await this.o.idempotency.prune(now);
    return pruned;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
