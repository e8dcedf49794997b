import { BoundedCache } from '../util/bounded-cache';
import type { Page } from '../store/memory-index';
import { StorageError } from '../../contract/problems';
import { type IndexEntry, type SortedIndex, createSortedIndex } from '../store/sorted-index';
import type { ProcessOutput } from '../process/spawner';
import type { HeadlessStore } from '../store/keyv-store';
import type { RunRecord, RunStatus } from '../../contract/records';
import type { StoredRun } from '../types';

const runKey = (taskId: string) => `run:${taskId}`;
/** A run's output tail, stored once it ends: beside the record, never in it. */
const outputKey = (taskId: string) => `output:${taskId}`;

const indexEntry = (run: StoredRun): IndexEntry<RunStatus> => ({ group: run.workspaceId, id: run.taskId, bucket: run.status });

/** The public record: the stored one without what only crash recovery needs. */
export function publicRecord(stored: StoredRun): RunRecord {
  const { process: _process, bootId: _bootId, webhookTargets: _targets, ...record } = stored;
  return record;
}

export interface RunRecordsOptions {
  store: HeadlessStore;
  log: (message: string, error?: unknown) => void;
  /** Ended runs kept in memory. @default 2000 */
  cacheSize?: number;
  /** Waits between the attempts to store a final record before it is left to the background. */
  retryDelaysMs?: number[];
  /** How often the background tries again to store final records the store refused. */
  backgroundRetryMs?: number;
}

/**
 * Run records: their keys in the store, the per-workspace list index, a cache of ended runs,
 * and the final records the store has refused so far. Those stay pinned in memory (never
 * evicted, so a reader never sees `running` again) and are retried in the background until
 * the store takes them.
 */
export class RunRecords {
  private readonly index: SortedIndex<RunStatus>;
  private readonly cache: BoundedCache<string, StoredRun>;
  private readonly unsaved = new Map<string, StoredRun>();
  /** Final records the list index has not taken yet. */
  private readonly unindexed = new Set<string>();
  private readonly retryDelaysMs: number[];
  private readonly backgroundRetryMs: number;
  private background: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly o: RunRecordsOptions) {
    this.cache = new BoundedCache(o.cacheSize ?? 2000);
    this.index = createSortedIndex(o.store, { table: 'headless_runs', prefix: 'run:', entry: indexEntry });
    this.retryDelaysMs = o.retryDelaysMs ?? [50, 200, 1000, 3000];
    this.backgroundRetryMs = o.backgroundRetryMs ?? 30_000;
  }

  /** Prepares the list index. Start-up only. */
  load(): Promise<void> {
    return this.index.load();
  }

  /** The runs recorded `running` (what a take-over reads). */
  async loadRunning(): Promise<StoredRun[]> {
    const ids = (await this.index.inBucket('running')).map((e) => e.id);
    const runs = await this.o.store.getMany<StoredRun>(ids.map(runKey));
    return runs.filter((r): r is StoredRun => r !== undefined && r.status === 'running');
  }

  /** Stores a new `running` record; it is listed once it is durable. */
  async create(record: StoredRun): Promise<void> {
    await this.o.store.set(runKey(record.taskId), record);
    await this.index.add(indexEntry(record));
  }

  /** Rewrites a running record (e.g. with its process); throws if the store refuses. */
  async save(record: StoredRun): Promise<void> {
    await this.o.store.set(runKey(record.taskId), record);
  }

  /** Stores the final record of a run taken over from a gone instance; throws if the store refuses. */
  async replaceOrphan(final: StoredRun): Promise<void> {
    await this.o.store.set(runKey(final.taskId), final);
    await this.index.move(indexEntry(final), 'running');
  }

  /**
   * Makes a final record the one every reader sees, at once, then stores it, retrying a
   * refusing store a few times; if it still refuses, the record stays pinned and the
   * background keeps trying.
   */
  async finish(final: StoredRun): Promise<void> {
    this.unsaved.set(final.taskId, final);
    // Listed under its final status at once; where the index refuses, it is moved with the record.
    await this.index.move(indexEntry(final), 'running').catch(() => this.unindexed.add(final.taskId));
    for (let attempt = 0; ; attempt++) {
      if (await this.tryStore(final)) return;
      const delay = this.retryDelaysMs[attempt];
      if (delay === undefined) {
        this.o.log(`could not store the final record of ${final.taskId}; it is kept in memory and retried`);
        this.scheduleBackground();
        return;
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Stores one pinned record; a non-storage error is logged and not retried. */
  private async tryStore(final: StoredRun): Promise<boolean> {
    try {
      await this.o.store.set(runKey(final.taskId), final);
      if (this.unindexed.has(final.taskId)) await this.index.move(indexEntry(final), 'running');
      this.unindexed.delete(final.taskId);
    } catch (error) {
      if (error instanceof StorageError) return false;
      this.o.log(`could not store the final record of ${final.taskId}`, error);
    }
    this.unsaved.delete(final.taskId);
    this.cache.set(final.taskId, final);
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

  /** One attempt at every pinned record. */
  private async flush(): Promise<void> {
    for (const final of [...this.unsaved.values()]) await this.tryStore(final);
  }

  /** Stores the output tail of an ended run; a refusing store is logged, not retried. */
  async saveOutput(taskId: string, output: ProcessOutput): Promise<void> {
    await this.o.store.set(outputKey(taskId), output).catch((e: unknown) => this.o.log(`could not store the output of ${taskId}`, e));
  }

  /** The stored output tail of an ended run, if one was kept. */
  output(taskId: string): Promise<ProcessOutput | undefined> {
    return this.o.store.get<ProcessOutput>(outputKey(taskId));
  }

  /** An ended run from memory or the store; a `running` one from the store only (the caller holds the live ones). */
  async find(taskId: string): Promise<StoredRun | undefined> {
    const known = this.unsaved.get(taskId) ?? this.cache.get(taskId);
    if (known) return known;
    const stored = await this.o.store.get<StoredRun>(runKey(taskId));
    // A final record pinned while the store was read is newer than what the store had.
    const pinned = this.unsaved.get(taskId);
    if (pinned) return pinned;
    if (stored && stored.status !== 'running') this.cache.set(taskId, stored);
    return stored;
  }

  /** Up to `limit` of the oldest runs created before `bound` (a sortable id bound). */
  async oldest(bound: string, limit: number): Promise<string[]> {
    return (await this.index.oldest(bound, limit)).map((e) => e.id);
  }

  /** Deletes an ended run's record and output tail. */
  async forget(run: StoredRun): Promise<void> {
    await this.o.store.delete(outputKey(run.taskId));
    await this.o.store.delete(runKey(run.taskId));
    await this.index.delete(indexEntry(run));
    this.cache.delete(run.taskId);
  }

  page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<Page> {
    return this.index.page(workspaceId, status, limit, cursor);
  }

  /** A last attempt at the pinned records, then stops the background. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.background);
    this.background = undefined;
    await this.flush();
    for (const final of this.unsaved.values()) this.o.log(`the final record of ${final.taskId} was never stored`);
  }
}
