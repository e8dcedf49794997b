/**
 * @module The one writer of run records: each change is ONE write of the record (a
 * compare-and-set where the store is shared), serialised per run. Only the lifecycle
 * (lifecycle.ts) and the dispatcher's transitions (outbox-writes.ts) import it, and the
 * composition root that makes it (.dependency-cruiser.cjs): every other unit reads RunRecords.
 * A final record the store refuses is retried, a few times at once, then in the background, and
 * until it is stored the run reads as `running` everywhere, so a restart that finds it so (and
 * interrupts it) contradicts nothing that was shown.
 */
import { StorageError } from '../../contract/problems';
import type { RecordTable } from '../store/headless-store';
import type { StoredRun } from '../types';
import { RUN_TABLE, RunRecords, type RunRecordsOptions } from './records';
import type { Change } from './transitions';

/** How often a compare-and-set that lost is tried again on the newer record. */
const CAS_ATTEMPTS = 5;

/** Told once a final record is durable. */
type Stored = (run: StoredRun) => void | Promise<void>;

/** The run records, and their one writer, over one table. */
export function openRunRecords(o: RunRecordsOptions): { records: RunRecords; writer: RunRecordWriter } {
  const table = o.store.table(RUN_TABLE);
  let writer: RunRecordWriter | undefined;
  const records = new RunRecords(o, table, (taskId) => writer?.writing(taskId) === true);
  writer = new RunRecordWriter(records, table, o);
  return { records, writer };
}

export class RunRecordWriter {
  /** Writes of one run, in order: a read-modify-write never overlaps another of the same run. */
  private readonly chains = new Map<string, Promise<unknown>>();
  /** Final changes the store refused, retried in the background, each with whoever waits for it. */
  private readonly unsaved = new Map<string, { change: Change; stored: Stored }>();
  private readonly retryDelaysMs: number[];
  private readonly backgroundRetryMs: number;
  private background: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly records: RunRecords,
    private readonly runs: RecordTable<StoredRun>,
    private readonly o: RunRecordsOptions,
  ) {
    this.retryDelaysMs = o.retryDelaysMs ?? [50, 200, 1000];
    this.backgroundRetryMs = o.backgroundRetryMs ?? 5_000;
  }

  /** Whether a write of the run is under way. */
  writing(taskId: string): boolean {
    return this.chains.has(taskId);
  }

  /** Stores a new `running` record of a run this instance runs. */
  async create(record: StoredRun): Promise<void> {
    await this.put(record);
    this.records.track(record);
  }

  /** Stores a new `queued` record: any instance may take it. */
  async add(record: StoredRun): Promise<void> {
    await this.put(record);
  }

  /**
   * Read-modify-write of one record, serialised per run: `change` sees the latest durable record
   * and answers the next one (undefined leaves it). Resolves with the record as stored.
   */
  update(taskId: string, change: Change): Promise<StoredRun | undefined> {
    const next = (this.chains.get(taskId) ?? Promise.resolve()).catch(() => undefined).then(() => this.change(taskId, change));
    this.chains.set(taskId, next);
    next.then(
      () => this.chains.get(taskId) === next && this.chains.delete(taskId),
      () => this.chains.get(taskId) === next && this.chains.delete(taskId),
    );
    return next;
  }

  private async change(taskId: string, change: Change): Promise<StoredRun | undefined> {
    for (let attempt = 0; ; attempt++) {
      // Shared: another instance may have written it (taken it over): always the stored one.
      const current = this.o.shared ? await this.runs.get(taskId) : (this.records.current(taskId) ?? (await this.records.find(taskId)));
      const changed = current && change(current);
      if (!changed || changed === current) return current;
      if (!this.o.shared) {
        await this.put(changed);
        return changed;
      }
      // Written only if it is still whose and what it was when read.
      if (await this.runs.putIf(taskId, changed, { owner: current.bootId, bucket: current.status })) {
        this.records.remember(changed);
        return changed;
      }
      if (attempt === CAS_ATTEMPTS) throw new StorageError(`the record of ${taskId} kept changing under this write`);
    }
  }

  private async put(record: StoredRun): Promise<void> {
    await this.runs.put(record.taskId, record);
    this.records.remember(record);
  }

  /**
   * Stores a run's final record (`change` makes it from the latest), retrying a refusing store a
   * few times; `stored` is called once it is durable. Resolves true if it was stored in time, false
   * if it was left to the background, which keeps trying (and calls `stored` when it succeeds).
   */
  async finish(taskId: string, change: Change, stored: Stored): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      if (await this.tryFinish(taskId, change, stored)) return true;
      const delay = this.retryDelaysMs[attempt];
      if (delay === undefined) break;
      await new Promise((r) => setTimeout(r, delay));
    }
    this.o.log(`could not store the final record of ${taskId}; it reads as running until the store takes it, and is retried`);
    this.unsaved.set(taskId, { change, stored });
    this.scheduleBackground();
    return false;
  }

  /** One attempt; a non-storage error is logged and not retried. */
  private async tryFinish(taskId: string, change: Change, stored: Stored): Promise<boolean> {
    let run: StoredRun | undefined;
    try {
      run = await this.update(taskId, change);
    } catch (error) {
      if (error instanceof StorageError) return false;
      this.o.log(`could not store the final record of ${taskId}`, error);
    }
    this.unsaved.delete(taskId);
    if (run) await stored(run);
    return true;
  }

  private scheduleBackground(): void {
    if (this.closed || this.background || this.unsaved.size === 0) return;
    this.background = setTimeout(() => {
      this.background = undefined;
      void this.flush().then(() => this.scheduleBackground());
    }, this.backgroundRetryMs);
    this.background.unref();
  }

  /** One attempt at every refused final record. */
  private async flush(): Promise<void> {
    for (const [taskId, { change, stored }] of [...this.unsaved]) await this.tryFinish(taskId, change, stored);
  }

  /** A last attempt at the refused final records, then stops the background. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.background);
    this.background = undefined;
    await this.flush();
    for (const taskId of this.unsaved.keys()) this.o.log(`the final record of ${taskId} was never stored; the next start records it interrupted`);
  }
}
