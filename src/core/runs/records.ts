import { type RunStatus, hasEnded } from '../../contract/records';
import type { ProcessOutput } from '../process/spawner';
import type { CollectionSpec, HeadlessStore, RecordTable } from '../store/headless-store';
import type { Page } from '../store/memory-index';
import type { StoredRun } from '../types';
import type { RunPatch } from './placement';
import { BoundedCache } from '../util/bounded-cache';

/** The runs' table: by workspace and status, with the runs owing a delivery and each run's owner. */
export const RUN_TABLE: CollectionSpec<StoredRun> = {
  name: 'run',
  group: 'workspaceId',
  bucket: { field: 'status' },
  flags: ['deliveryDueAt'],
  owner: 'bootId',
};

/** List pages kept in memory (each some ids), across workspaces. */
const PAGES_KEPT = 200;

/** A run's output tail, stored once it ends: beside the record, never in it. */
const outputKey = (taskId: string) => `output:${taskId}`;
const patchKey = (taskId: string) => `patch:${taskId}`;

export interface RunRecordsOptions {
  store: HeadlessStore;
  log: (message: string, error?: unknown) => void;
  /** Other instances write the same records (a fleet): every change is a compare-and-set on the stored one. */
  shared?: boolean;
  /**
   * Whether what is kept in memory is known fresh now: alone, always; in a fleet, while this
   * instance hears every change of a record (runs/records.ts: `evict`), else nothing kept is read. @default always
   */
  fresh?: () => boolean;
  /** Ended runs kept in memory. @default 2000 */
  cacheSize?: number;
  /** Waits between the attempts to store a final record before it is left to the background. */
  retryDelaysMs?: number[];
  /** How often the background tries again to store final records the store refused. */
  backgroundRetryMs?: number;
}

/**
 * Run records (docs/reliability.md): what is read of them, and what is kept of them in memory.
 * Every state change of a run is ONE write of its record, made by runs/record-writer.ts (which
 * only the lifecycle and the dispatcher's transitions import), and its outbox rides in it: what
 * lists, recovery, the dispatcher and retention look up is derived from the stored records
 * (store/collection.ts). Readers only ever see what is durable.
 */
export class RunRecords {
  private readonly cache: BoundedCache<string, StoredRun>;
  /** Records of the runs this instance runs: the latest durable version, without a read. */
  private readonly tracked = new Map<string, StoredRun>();
  /** Changes heard (and clears): a record read while one was heard is not kept, since it may predate it. */
  private heard = 0;
  /** List pages read of the store, keyed by what was asked and by how many changes their workspace had then (`changes`): a change makes them unreachable. */
  private readonly pages: BoundedCache<string, Page>;
  /** Per workspace, the changes written or heard: part of its pages' keys. */
  private readonly changes = new Map<string, number>();
  private readonly fresh: () => boolean;

  /** `writing`: whether a write of the run is under way (a record read meanwhile is not kept). */
  constructor(
    private readonly o: RunRecordsOptions,
    private readonly runs: RecordTable<StoredRun>,
    private readonly writing: (taskId: string) => boolean,
  ) {
    this.cache = new BoundedCache(o.cacheSize ?? 2000);
    this.pages = new BoundedCache(PAGES_KEPT);
    this.fresh = o.fresh ?? (() => true);
  }

  /** Another instance (or this one) changed the run's record: what is kept of it, and its workspace's list pages, are dropped. */
  evict(taskId: string, workspaceId: string): void {
    this.heard += 1;
    this.cache.delete(taskId);
    this.changed(workspaceId);
  }

  /** Changes may have gone unheard (the fleet's listening connection was cut): nothing kept is trusted. */
  clear(): void {
    this.heard += 1;
    this.cache.clear();
    this.pages.clear();
  }

  private changed(workspaceId: string): void {
    this.changes.set(workspaceId, (this.changes.get(workspaceId) ?? 0) + 1);
  }

  private kept(taskId: string): StoredRun | undefined {
    return this.fresh() ? this.cache.get(taskId) : undefined;
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

  /** Keeps `record`, as stored, for the reads after it. */
  remember(record: StoredRun): void {
    this.changed(record.workspaceId);
    if (this.tracked.has(record.taskId)) this.tracked.set(record.taskId, record);
    // In a fleet a change by another instance may be heard before this write's answer: only reads keep records there.
    if (!hasEnded(record.status) || this.o.shared) this.cache.delete(record.taskId);
    else this.cache.set(record.taskId, record);
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
    const heard = this.heard;
    return this.kept(taskId) ?? this.keep(await this.runs.get(taskId), heard);
  }

  /**
   * Runs by id, in their order (a list page): those this instance runs or keeps as they are, the
   * rest in one read, not one each (a page of 50 in PostgreSQL was 50 round trips).
   */
  async findMany(taskIds: string[]): Promise<Array<StoredRun | undefined>> {
    const known = taskIds.map((id) => this.current(id) ?? this.kept(id));
    const missing = taskIds.filter((_, i) => known[i] === undefined);
    const heard = this.heard;
    const read = missing.length === 0 ? [] : await this.runs.getMany(missing);
    const stored = new Map(missing.map((id, i) => [id, this.keep(read[i], heard)]));
    return taskIds.map((id, i) => known[i] ?? stored.get(id));
  }

  /** An ended record read from the store, kept in memory for the next read, unless a change was heard since the read began (`heard`). */
  private keep(stored: StoredRun | undefined, heard: number): StoredRun | undefined {
    if (stored && hasEnded(stored.status) && this.fresh() && heard === this.heard && !this.writing(stored.taskId)) this.cache.set(stored.taskId, stored);
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
    this.changed(run.workspaceId);
  }

  /** A page of a workspace's run ids, newest first: kept until a change of one of its runs is written or heard (`stored`: read from the store). */
  async page(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string, o: { stored?: boolean } = {}): Promise<Page> {
    // `stored`: a decision (a daily limit) reads what is stored, not what was heard so far.
    if (!this.fresh() || o.stored) return this.runs.page(workspaceId, status, limit, cursor);
    const key = JSON.stringify([workspaceId, this.changes.get(workspaceId) ?? 0, status, limit, cursor]);
    const kept = this.pages.get(key);
    if (kept) return kept;
    const heard = this.heard;
    const page = await this.runs.page(workspaceId, status, limit, cursor);
    if (heard === this.heard && this.fresh()) this.pages.set(key, page);
    return page;
  }
}
