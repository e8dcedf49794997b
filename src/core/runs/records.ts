import { StorageError } from '../../contract/problems';
import { type RunStatus, hasEnded } from '../../contract/records';
import type { ProcessOutput } from '../process/spawner';
import type { CollectionSpec, HeadlessStore, RecordTable } from '../store/headless-store';
import type { Page } from '../store/memory-index';
import type { StoredRun } from '../types';
import type { RunPatch } from './placement';
import type { Change } from './transitions';
import { BoundedCache } from '../util/bounded-cache';

/** How often a compare-and-set that lost is tried again on the newer record. */
const CAS_ATTEMPTS = 5;
/** The runs' table: by workspace and status, with the runs owing a delivery and each run's owner. */
export const RUN_TABLE: CollectionSpec<StoredRun> = {
  name: 'run',
  group: 'workspaceId',
  bucket: { field: 'status' },
  flags: ['deliveryDueAt'],
  owner: 'bootId',
};

/** A run's output tail, stored once it ends: beside the record, never in it. */
const outputKey = (taskId: string) => `output:${taskId}`;
const patchKey = (taskId: string) => `patch:${taskId}`;

export interface RunRecordsOptions {
  store: HeadlessStore;
  log: (message: string, error?: unknown) => void;
  /** Other instances write the same records (a fleet): every change is a compare-and-set on the stored one, and nothing is cached. */
  shared?: boolean;
  /** Ended runs kept in memory. @default 2000 */
  cacheSize?: number;
  /** Waits between the attempts to store a final record before it is left to the background. */
  retryDelaysMs?: number[];
  /** How often the background tries again to store final records the store refused. */
  backgroundRetryMs?: number;
}

/** Told once a final record is durable. */
type Stored = (run: StoredRun) => void | Promise<void>;

/**
 * Run records (docs/reliability.md). Every state change of a run is ONE write of its record, and
 * its outbox rides in it: what lists, recovery, the dispatcher and retention look up is derived
 * from the stored records (store/collection.ts). Readers only ever see what is durable: a final
 * record the store refuses is retried, a few times at once, then in the background, and until it
 * is stored the run reads as `running` everywhere, so a restart that finds it so (and interrupts
 * it) contradicts nothing that was shown.
 */
export class RunRecords {
  private readonly runs: RecordTable<StoredRun>;
  private readonly cache: BoundedCache<string, StoredRun>;
  /** Records of the runs this instance runs: the latest durable version, without a read. */
  private readonly tracked = new Map<string, StoredRun>();
  /** Writes of one run, in order: a read-modify-write never overlaps another of the same run. */
  private readonly chains = new Map<string, Promise<unknown>>();
  /** Final changes the store refused, retried in the background, each with whoever waits for it. */
  private readonly unsaved = new Map<string, { change: Change; stored: Stored }>();
  private readonly retryDelaysMs: number[];
  private readonly backgroundRetryMs: number;
  private background: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly o: RunRecordsOptions) {
    this.cache = new BoundedCache(o.cacheSize ?? 2000);
    this.runs = o.store.table(RUN_TABLE);
    this.retryDelaysMs = o.retryDelaysMs ?? [50, 200, 1000];
    this.backgroundRetryMs = o.backgroundRetryMs ?? 5_000;
  }

  /** Prepares the lookups. Start-up only. */
  load(): Promise<void> {
    return this.runs.load();
  }

  /** The runs recorded `running` (what a take-over reads). */
  async loadRunning(): Promise<StoredRun[]> {
    const runs = await this.runs.getMany(await this.runs.inBucket('running'));
    return runs.filter((r): r is StoredRun => r !== undefined && r.status === 'running');
  }

  /** The runs with a pending webhook delivery (what the dispatcher takes over). */
  async withDueDeliveries(): Promise<StoredRun[]> {
    const runs = await this.runs.getMany(await this.runs.flagged('deliveryDueAt'));
    return runs.filter((r): r is StoredRun => r?.deliveryDueAt !== undefined);
  }

  /** Stores a new `running` record of a run this instance runs. */
  async create(record: StoredRun): Promise<void> {
    await this.put(record);
    this.track(record);
  }

  /** Stores a new `queued` record: any instance may take it. */
  async add(record: StoredRun): Promise<void> {
    await this.put(record);
  }

  /** This instance runs it from now on (a queued run it took). */
  track(record: StoredRun): void {
    this.tracked.set(record.taskId, record);
  }

  /** The ids of the runs in `status`, oldest first. */
  /** How many runs have `status` (with `before`: that were accepted before that run). */
  countInStatus(status: RunStatus, before?: string): Promise<number> {
    return this.runs.count(status, before);
  }

  async inStatus(status: RunStatus): Promise<string[]> {
    return (await this.runs.inBucket(status)).sort();
  }

  /** The latest durable record of a run this instance runs. */
  current(taskId: string): StoredRun | undefined {
    return this.tracked.get(taskId);
  }

  /** No longer runs here (its final record is stored, or was never made). */
  untrack(taskId: string): void {
    this.tracked.delete(taskId);
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
      const current = this.o.shared ? await this.runs.get(taskId) : (this.tracked.get(taskId) ?? (await this.find(taskId)));
      const changed = current && change(current);
      if (!changed || changed === current) return current;
      if (!this.o.shared) {
        await this.put(changed);
        return changed;
      }
      // Written only if it is still whose and what it was when read.
      if (await this.runs.putIf(taskId, changed, { owner: current.bootId, bucket: current.status })) {
        this.remember(changed);
        return changed;
      }
      if (attempt === CAS_ATTEMPTS) throw new StorageError(`the record of ${taskId} kept changing under this write`);
    }
  }

  private async put(record: StoredRun): Promise<void> {
    await this.runs.put(record.taskId, record);
    this.remember(record);
  }

  private remember(record: StoredRun): void {
    if (this.tracked.has(record.taskId)) this.tracked.set(record.taskId, record);
    if (!hasEnded(record.status) || this.o.shared) this.cache.delete(record.taskId);
    else this.cache.set(record.taskId, record);
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

  /** Stores the output tail of an ended run; a refusing store is logged, not retried. */
  async saveOutput(taskId: string, output: ProcessOutput): Promise<void> {
    await this.o.store.set(outputKey(taskId), output).catch((e: unknown) => this.o.log(`could not store the output of ${taskId}`, e));
  }

  /** The stored output tail of an ended run, if one was kept. */
  output(taskId: string): Promise<ProcessOutput | undefined> {
    return this.o.store.get<ProcessOutput>(outputKey(taskId));
  }

  /** Stores the patch of what a run changed in its worktree, before its final record (docs/worktrees.md). */
  async savePatch(taskId: string, patch: RunPatch): Promise<void> {
    await this.o.store.set(patchKey(taskId), patch);
  }

  /** The stored patch of a run that ran in a worktree. */
  patch(taskId: string): Promise<RunPatch | undefined> {
    return this.o.store.get<RunPatch>(patchKey(taskId));
  }

  /** A run's durable record: an ended one from memory or the store, a `running` one from the store. */
  async find(taskId: string): Promise<StoredRun | undefined> {
    return this.cache.get(taskId) ?? this.keep(await this.runs.get(taskId));
  }

  /**
   * Runs by id, in their order (a list page): those this instance runs or keeps as they are, the
   * rest in one read, not one each (a page of 50 in PostgreSQL was 50 round trips).
   */
  async findMany(taskIds: string[]): Promise<Array<StoredRun | undefined>> {
    const known = taskIds.map((id) => this.current(id) ?? this.cache.get(id));
    const missing = taskIds.filter((_, i) => known[i] === undefined);
    const read = missing.length === 0 ? [] : await this.runs.getMany(missing);
    const stored = new Map(missing.map((id, i) => [id, this.keep(read[i])]));
    return taskIds.map((id, i) => known[i] ?? stored.get(id));
  }

  /** An ended record read from the store, kept in memory for the next read (not in a fleet). */
  private keep(stored: StoredRun | undefined): StoredRun | undefined {
    if (stored && hasEnded(stored.status) && !this.o.shared && !this.chains.has(stored.taskId)) this.cache.set(stored.taskId, stored);
    return stored;
  }

  /** Up to `limit` of the oldest runs created before `bound` (a sortable id bound). */
  oldest(bound: string, limit: number): Promise<string[]> {
    return this.runs.oldest(bound, limit);
  }

  /** Deletes an ended run's record (its outbox with it) and output tail. */
  async forget(run: StoredRun): Promise<void> {
    await this.o.store.delete(outputKey(run.taskId));
    if (run.changes) await this.o.store.delete(patchKey(run.taskId));
    await this.runs.delete(run.taskId);
    this.cache.delete(run.taskId);
  }

  page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<Page> {
    return this.runs.page(workspaceId, status, limit, cursor);
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
