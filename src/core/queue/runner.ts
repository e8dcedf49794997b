import type { Log } from '../logger';
import type { StoredRun } from '../types';

/** What taking a queued run here came to; `refused`: the store refused the take, so the pass stops until the next sweep. */
export type TakeResult = 'started' | 'waiting' | 'gone' | 'refused';

export interface QueueRunnerDeps {
  /** The queued runs, oldest first. */
  ids(): Promise<string[]>;
  /** Ends a queued run whose time in the queue ran out. */
  expire(taskId: string): Promise<unknown>;
  /** Run slots free on this instance now. */
  freeSlots(): number;
  /** The run's stored record, read now. */
  find(taskId: string): Promise<StoredRun | undefined>;
  /** Takes a queued run and starts it here; `waiting` when it cannot start yet (its Session is busy). Absent: runs are placed elsewhere (a fleet's queue), and passes only end expired ones. */
  take?(record: StoredRun): Promise<TakeResult>;
  log: Log;
  /** How often the queue is looked at without a reason (expiries; in a fleet, slots freed elsewhere). */
  sweepMs: number;
}

/**
 * Starts queued runs as slots free up, oldest first, and ends those whose time ran out. A pass
 * is made when a slot frees, when a run is queued, and every `sweepMs`; passes never overlap, and
 * one asked for during a pass follows it. A run that must wait for its Session is passed over,
 * not waited on, so it never holds up the runs behind it.
 */
export class QueueRunner {
  private passing = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly $: QueueRunnerDeps) {}

  start(): void {
    this.timer = setInterval(() => this.kick(true), this.$.sweepMs);
    this.timer.unref();
    this.kick(true);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Asks for a pass; `sweep`: read every queued run, for expiries, even with no slot free. */
  kick(sweep = false): void {
    if (this.timer === undefined) return;
    void this.pass(sweep).catch((error: unknown) => this.$.log('the queue could not be read', error));
  }

  private async pass(sweep: boolean): Promise<void> {
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    try {
      let full = sweep;
      do {
        this.again = false;
        await this.once(full);
        full = false;
      } while (this.again && this.timer !== undefined);
    } finally {
      this.passing = false;
    }
  }

  private async once(sweep: boolean): Promise<void> {
    const take = this.$.take;
    if (!take && !sweep) return;
    if (!sweep && this.$.freeSlots() === 0) return;
    const now = Date.now();
    // Once a run has found no slot, none behind it is taken in this pass, even if a slot frees
    // meanwhile: that slot asks for a new pass, from the oldest (a loaded CI run caught a sweep
    // giving a freed slot to the run it had reached, ahead of older ones).
    let full = false;
    for (const taskId of await this.$.ids()) {
      if (this.timer === undefined || (!sweep && full)) return;
      const record = await this.$.find(taskId);
      if (record?.status !== 'queued' || !record.queued) continue;
      if (Date.parse(record.queued.expiresAt) <= now) await this.$.expire(taskId);
      else if (!take) continue;
      else if (full || this.$.freeSlots() === 0) full = true;
      else if ((await take(record)) === 'refused') {
        // Not again at once (its released slot asked for a pass): a refusing store is not hammered.
        this.again = false;
        return;
      }
    }
  }
}
