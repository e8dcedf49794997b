/**
 * @module The one writer of a run's status. Each method is one transition of transitions.ts,
 * made as ONE write of the record; every way a run ends (its process ended, it was cancelled or
 * expired in the queue, its owner is gone) then goes through the same `ended` path, which tells
 * everyone once the final record is durable: its output, webhooks, timeline, observers (logs,
 * metrics, traces) and whoever waits for it.
 */
import { hasEnded } from '../../contract/records';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import type { ProcessOutput } from '../process/spawner';
import { publicRecord } from '../public-record';
import type { ServiceObserver } from '../telemetry/observer';
import type { StoredRun, WebhookTarget } from '../types';
import type { RunResult } from './live-run';
import type { Placements } from './placements';
import type { RunRecordWriter } from './record-writer';
import type { RunRecords } from './records';
import { type Change, type FinishFields, type QueuedEnding, type TurnNotes, change } from './transitions';
import type { ApprovalRecord, RunApprovals, RunChanges, RunError } from '../../contract/records';

export const EMPTY_OUTPUT: ProcessOutput = { stdout: '', stderr: '', truncated: false };
/** How often a caller waiting for a run that another instance runs reads its record. */
const WAIT_POLL_MS = 1000;

/** A run some caller waits for, ended elsewhere or still queued, when this instance stops: its answer says so. */
export class StillPending extends Error {
  constructor(readonly record: StoredRun) {
    super(`Run "${record.taskId}" is ${record.status}; it goes on after the service is back.`);
    this.name = 'StillPending';
  }
}

export interface LifecycleResources {
  records: RunRecords;
  /** The one writer of run records, which only the lifecycle (and the dispatcher's transitions) may use. */
  writer: RunRecordWriter;
  events: RunEvents;
  webhooks: Webhooks;
  observe: ServiceObserver;
  placement: Placements;
  log: Log;
  instanceId: string;
}

interface Waiter {
  resolve(result: RunResult): void;
  reject(error: Error): void;
  done: Promise<RunResult>;
  poll?: NodeJS.Timeout;
}

export class RunLifecycle {
  private readonly waiters = new Map<string, Waiter>();
  /** Runs whose write making them this instance's is under way. */
  private readonly claiming = new Set<string>();

  constructor(private readonly $: LifecycleResources) {}

  /** A run this instance runs (from before the write that makes it so until it has ended here): never taken over. */
  isHere(taskId: string): boolean {
    return this.claiming.has(taskId) || this.$.records.current(taskId) !== undefined;
  }

  /** ∅ → running: a start admitted at once. */
  accept(record: StoredRun): Promise<void> {
    return this.here(record.taskId, () => this.$.writer.create(record));
  }

  /** ∅ → queued. */
  enqueue(record: StoredRun): Promise<void> {
    return this.$.writer.add(record);
  }

  /** queued → running, for this instance; undefined if another change came first. Here from before the write. `workspaceTargets`: its workspace's webhook as this instance defines it. */
  take(taskId: string, o: { workspaceTargets?: WebhookTarget[] } = {}): Promise<StoredRun | undefined> {
    const at = new Date();
    return this.here(taskId, async () => {
      const taken = await this.$.writer.update(taskId, change.take(this.$.instanceId, at, o.workspaceTargets));
      if (!(taken?.status === 'running' && taken.bootId === this.$.instanceId && taken.startedAt === at.toISOString())) return undefined;
      this.$.records.track(taken);
      return taken;
    });
  }

  /** Runs `write` with the run counted here throughout, so a take-over sweep never takes it midway. */
  private async here<T>(taskId: string, write: () => Promise<T>): Promise<T> {
    this.claiming.add(taskId);
    try {
      return await write();
    } finally {
      this.claiming.delete(taskId);
    }
  }

  /** running → running: where its process runs and where it was placed. */
  recordProcess(taskId: string, owner: string, fields: Pick<StoredRun, 'process' | 'placement'>): Promise<StoredRun | undefined> {
    return this.$.writer.update(taskId, change.recordProcess(owner, fields));
  }

  /** running → running: the agent's session id, with the `agent.session` webhooks it owes, scheduled once `stored` has run. */
  async noteSession(taskId: string, owner: string, agentSessionId: string, at: string, stored: () => Promise<void>): Promise<void> {
    const run = await this.$.writer.update(taskId, change.noteSession(owner, agentSessionId, at));
    await stored();
    if (run) this.$.webhooks.schedule(run);
  }

  /** running → running: what it was asked and answered, with the `permission.requested` webhooks a new question owes. */
  async noteApprovals(taskId: string, owner: string, approvals: RunApprovals, asked?: ApprovalRecord): Promise<void> {
    const run = await this.$.writer.update(taskId, change.noteApprovals(owner, approvals, asked));
    if (run && asked) this.$.webhooks.schedule(run);
  }

  /** running → running: what a turn policy found between turns (its verify loop's attempts). */
  async noteTurn(taskId: string, owner: string, notes: TurnNotes): Promise<void> {
    await this.$.writer.update(taskId, change.noteTurn(owner, notes));
  }

  /**
   * running → final, by its owner, retrying a refusing store (RunRecords.finish). `ended` is
   * called with the record as stored: the final one, or one another instance took over (still
   * running, or already ended by it), and whether this instance wrote its end: only then is it
   * this instance's to announce (webhooks, metrics), never twice.
   * Resolves false when the write was left to the background.
   */
  finish(taskId: string, owner: string, fields: FinishFields, ended: (stored: StoredRun, mine: boolean) => Promise<void>): Promise<boolean> {
    return this.$.writer.finish(taskId, change.finish(owner, fields, new Date()), (stored) => ended(stored, stored.bootId === this.$.instanceId));
  }

  /** queued → cancelled, expired or failed; undefined if it had left the queue. */
  async endQueued(taskId: string, ending: QueuedEnding | { status: 'failed'; error: RunError }): Promise<StoredRun | undefined> {
    return this.endBy(taskId, change.endQueued(ending, this.$.instanceId, new Date()));
  }

  /** running → running: this instance becomes its owner, as `gone`'s; false if another change came first. */
  async claim(taskId: string, gone: string): Promise<boolean> {
    const claimed = await this.$.writer.update(taskId, change.claim(gone, this.$.instanceId));
    return claimed?.status === 'running' && claimed.bootId === this.$.instanceId;
  }

  /** running → interrupted, as `owner` (gone, or this instance once it claimed it), with what it changed where that is here; undefined if refused. */
  async interrupt(taskId: string, owner: string, approvals?: RunApprovals): Promise<StoredRun | undefined> {
    const placement = (await this.$.records.find(taskId))?.placement;
    const changes = placement ? await this.settlePlacement(taskId, placement) : undefined;
    return this.endBy(taskId, change.interrupt(owner, this.$.instanceId, new Date(), { changes, approvals }));
  }

  /**
   * What an ending run changed where it was placed (its worktree), for its final record; its patch
   * is stored now. Undefined when there is nothing to read or it could not be read (then its place is kept).
   */
  async settlePlacement(taskId: string, placement: NonNullable<StoredRun['placement']>): Promise<RunChanges | undefined> {
    try {
      const settled = await this.$.placement.settle({ taskId, placement });
      if (!settled) return undefined;
      await this.$.records.savePatch(taskId, settled.patch);
      return { ...settled.changes, worktree: settled.kept ?? null };
    } catch (error) {
      this.$.log(`could not read what run ${taskId} changed; its worktree is kept`, error);
      return undefined;
    }
  }

  /** One write that ends the run here; then the ended path. */
  private async endBy(taskId: string, ending: Change): Promise<StoredRun | undefined> {
    let made: StoredRun | undefined;
    const final = await this.$.writer.update(taskId, (r) => {
      made = ending(r);
      return made;
    });
    if (!made || final !== made) return undefined;
    await this.ended(final);
    return final;
  }

  /**
   * The one "ended" path: the final record is durable, now everyone is told. `here: false` for a
   * run another instance ended (it took it over): its own path told the webhooks and observers.
   */
  async ended(final: StoredRun, o: { output?: ProcessOutput; here?: boolean } = {}): Promise<void> {
    const { taskId } = final;
    const here = o.here ?? true;
    if (o.output && here) await this.$.records.saveOutput(taskId, o.output);
    if (here) this.$.webhooks.schedule(final);
    const record = publicRecord(final);
    await this.$.events.end(record).catch((error: unknown) => this.$.log(`could not end the events of ${taskId}`, error));
    this.$.records.untrack(taskId);
    if (here) this.$.observe.emit('runEnded', record);
    if (here && final.placement) {
      const { workspaceId, placement, changes } = final;
      await this.$.placement
        .release({ taskId, workspaceId, placement, ...(changes ? { changes } : {}) })
        .catch((error: unknown) => this.$.log(`could not release the placement of ${taskId}`, error));
    }
    if (this.waiters.has(taskId)) this.settle(taskId, { record, output: o.output ?? (await this.storedOutput(taskId)) });
  }

  /** An ended run's stored output, empty when none was kept. */
  private async storedOutput(taskId: string): Promise<ProcessOutput> {
    return (await this.$.records.output(taskId).catch(() => undefined)) ?? EMPTY_OUTPUT;
  }

  /**
   * Settles once the run has ended: told at once when it ends here, else (another instance runs
   * it) seen in its record, read every WAIT_POLL_MS.
   */
  waitFor(taskId: string): Promise<RunResult> {
    const known = this.waiters.get(taskId);
    if (known) return known.done;
    let resolve!: Waiter['resolve'];
    let reject!: Waiter['reject'];
    const done = new Promise<RunResult>((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    done.catch(() => undefined);
    const waiter: Waiter = { resolve, reject, done };
    waiter.poll = setInterval(() => void this.poll(taskId), WAIT_POLL_MS);
    this.waiters.set(taskId, waiter);
    return done;
  }

  private async poll(taskId: string): Promise<void> {
    if (this.isHere(taskId)) return;
    const record = await this.$.records.find(taskId).catch(() => undefined);
    if (!record || !hasEnded(record.status) || record.bootId === this.$.instanceId) return;
    this.settle(taskId, { record: publicRecord(record), output: await this.storedOutput(taskId) });
  }

  /** Tells whoever waits for the run: its result, or why there is none. */
  settle(taskId: string, result: RunResult | Error): void {
    const waiter = this.waiters.get(taskId);
    if (!waiter) return;
    clearInterval(waiter.poll);
    this.waiters.delete(taskId);
    if (result instanceof Error) waiter.reject(result);
    else waiter.resolve(result);
  }

  /** A last attempt at the final records the store refused (RunRecordWriter.close); at shutdown, once the runs have stopped. */
  closeWrites(): Promise<void> {
    return this.$.writer.close();
  }

  /**
   * The service stops taking runs: whoever waits for a run it does not run (queued, or run
   * elsewhere) is told at once that the run goes on later. Those it runs end through the ended path.
   */
  async close(): Promise<void> {
    for (const taskId of [...this.waiters.keys()]) {
      if (this.isHere(taskId)) continue;
      const record = await this.$.records.find(taskId).catch(() => undefined);
      if (record && !hasEnded(record.status)) this.settle(taskId, new StillPending(record));
    }
  }
}
