/**
 * @module The queue in front of the run slots (docs/queue-and-schedules.md): accepts starts into it
 * and starts them from it, oldest first, as slots (and their Sessions) free up. Each queued run is
 * a record in the store: accepted is the lifecycle's `enqueue` (the `queued` record holds what
 * starting it needs), taken its `take` (one compare-and-set to `running`), cancelled or expired
 * its `endQueued`. The order is the records' sortable ids; nothing about the queue lives only in
 * memory.
 */
import { Refusal } from '../../contract/problems';
import { sortableIdPattern } from '../../contract/ids';
import { type RunRecord, hasEnded } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import type { ResolvedSpec, SpecRefusal } from './run-spec';
import type { RunSpec } from '../../contract/run-spec';
import type { RunSource } from '../../contract/records';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import { publicRecord } from '../public-record';
import type { Admission, Reservation } from './admission';
import type { RunLauncher } from './launcher';
import type { RunLifecycle } from './lifecycle';
import type { StartedRun } from './live-run';
import { newRunRecord, queuedEventOf, startedEventOf } from './new-record';
import type { RunRecords } from './records';
import type { SessionBook } from '../sessions';
import type { QueuedStart, RunOrigin, SlotShare, StoredRun, WebhookTarget, Workspace } from '../types';
import { newSortableId } from '../util/ids';
import type { QueuePolicy } from '../queue/policy';
import { QueueRunner, type TakeResult } from '../queue/runner';
import type { Fleet } from '../fleet/fleet';
import type { PlacedTake } from '../fleet/fleet-queue';

const RUN_ID = sortableIdPattern('run_');

/** How often the queue is read without a reason: expiries, and in a fleet slots freed elsewhere. */
const SWEEP_MS = 1000;
/** Problems that mean "not yet" for a run leaving the queue; any other means "never". */
const NOT_YET = ['workspace_not_found', 'shutting_down'];

export interface QueueResources {
  lifecycle: RunLifecycle;
  admission: Admission;
  sessions: SessionBook;
  records: RunRecords;
  events: RunEvents;
  launcher: RunLauncher;
  log: Log;
  instanceId: string;
  /** A workspace by id; throws `workspace_not_found` where this instance does not run it. */
  workspace(id: string): Promise<Workspace>;
  /** The workspaces whose runs this instance takes from the fleet's queue. */
  runsHere(): string[];
  /** This instance's own address for its runs (`apiUrl`), where one is set: a run accepted elsewhere calls back the instance it runs on. */
  ownApiUrl(): string | undefined;
  /** The targets of the workspace's own webhook, as this instance defines it (delivery/targets.ts). */
  workspaceTargets(workspace: Workspace): WebhookTarget[];
  /** What a run accepted by another instance loosens of this one's own layers for it: its workspace's, its schedule's or trigger's (runs/run-spec.ts: loosens). */
  loosens(workspace: Workspace, run: { spec: RunSpec; source?: RunSource }): SpecRefusal | undefined;
  fleet: Fleet;
}

export interface EnqueueInput {
  workspace: Workspace;
  request: StartRequest;
  spec: ResolvedSpec;
  apiUrl: string;
  taskId?: string;
  policy: QueuePolicy;
  webhookTargets: WebhookTarget[];
  origin: RunOrigin;
  /** Its source's runs at once, kept with it: whichever instance takes it holds it to them. */
  share?: SlotShare;
}

export class RunQueue {
  private readonly runner: QueueRunner;
  /** Starts being queued now, not yet counted in the store: the queue's bound holds on one instance. */
  private enqueuing = 0;

  constructor(private readonly $: QueueResources) {
    const placed = $.fleet.queue;
    this.runner = new QueueRunner({
      ids: () => this.ids(),
      expire: (taskId) => $.lifecycle.endQueued(taskId, 'expired'),
      freeSlots: () => $.admission.free,
      find: (taskId) => $.records.find(taskId),
      // In a fleet its queue places runs; the store's queue only ends those whose time ran out.
      ...(placed ? {} : { take: (record: StoredRun) => this.take(record) }),
      log: $.log,
      sweepMs: SWEEP_MS,
    });
    $.admission.onFree(() => {
      this.runner.kick();
      placed?.kick();
    });
  }

  async start(): Promise<void> {
    this.runner.start();
    const placed = this.$.fleet.queue;
    if (placed)
      await placed.serve({
        workspaces: this.$.runsHere(),
        room: () => this.$.admission.free,
        take: (id, workspaceId) => this.placedTake(id, workspaceId),
        log: this.$.log,
      });
  }

  stop(): void {
    this.runner.stop();
  }

  /**
   * In a fleet, sends the job that places a run just queued. The record comes first, so members
   * take runs in the order queued; a run whose job could not be sent ends `failed` (its start is
   * refused), and one left without a job by a crash is placed again by the sweep (`placeOrphans`).
   */
  private async place(record: StoredRun): Promise<void> {
    const placed = this.$.fleet.queue;
    if (!placed) return;
    try {
      await placed.place(record.workspaceId, record.taskId);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      await this.$.lifecycle.endQueued(record.taskId, { status: 'failed', error: { code: 'storage_unavailable', message } }).catch(() => undefined);
      throw error;
    }
  }

  /** Places again the queued runs whose accepting instance is gone: one that died between writing a record and placing it left it without a job (a second job is harmless: a run is taken once). */
  async placeOrphans(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> {
    const placed = this.$.fleet.queue;
    if (!placed) return;
    for (const taskId of await this.ids()) {
      const record = await this.$.records.find(taskId);
      if (record?.status === 'queued' && (await isGone(record.bootId))) await placed.place(record.workspaceId, taskId);
    }
  }

  /** Takes a run the fleet's queue placed here; `absent`: no such run (a job is input: its id is checked first). */
  private async placedTake(taskId: string, workspaceId: string): Promise<PlacedTake> {
    const record = RUN_ID.test(taskId) ? await this.$.records.find(taskId) : undefined;
    if (!record) return 'absent';
    // A job in another workspace's queue was not placed by a member: it is dropped, never waited on.
    if (record.status !== 'queued' || !record.queued || record.workspaceId !== workspaceId) return 'gone';
    if (Date.parse(record.queued.expiresAt) <= Date.now()) {
      await this.$.lifecycle.endQueued(taskId, 'expired');
      return 'gone';
    }
    return this.take(record);
  }

  /** The queued runs, oldest first. */
  private ids(): Promise<string[]> {
    return this.$.records.inStatus('queued');
  }

  /** The queued runs that count against `policy.max` (at most `max + 1` are counted). */
  private async count(policy: QueuePolicy, workspaceId: string): Promise<number> {
    if (policy.scope === 'installation') return this.$.records.countInStatus('queued');
    return (await this.$.records.page(workspaceId, 'queued', policy.max + 1)).ids.length;
  }

  /** Its Session made if new (so its `resumeId` can be given), then ONE write of the `queued` record; `429 queue_full` when full. */
  async enqueue(a: EnqueueInput): Promise<StartedRun> {
    const { workspace, request, policy } = a;
    const { adapter, known, chosenBy } = await this.$.admission.plan(workspace, {
      agent: a.spec.agent,
      resumeId: request.resumeId,
      continues: a.spec.verify !== undefined,
    });
    if (known && !this.$.sessions.isResumable(known)) throw new Refusal('session_not_resumable', `Session "${known.resumeId}" cannot be resumed.`);
    this.enqueuing += 1;
    try {
      if ((await this.count(policy, workspace.id)) + this.enqueuing > policy.max) {
        throw new Refusal('queue_full', `All run slots are busy and the queue holds ${policy.max} runs; retry later.`, { retryAfterSeconds: 5 });
      }
      const now = new Date();
      const iso = now.toISOString();
      const taskId = a.taskId ?? newSortableId('run_');
      const resumeId = known?.resumeId ?? newSortableId('ses_');
      if (!known)
        await this.$.sessions.create({ resumeId, workspaceId: workspace.id, agent: adapter.name, retired: false, createdAt: iso, lastRunAt: iso, runCount: 0 });
      const { after, traceparent, source = { kind: 'api' } } = a.origin;
      const queued: QueuedStart = {
        prompt: request.prompt,
        resumes: known !== undefined,
        apiUrl: a.apiUrl,
        expiresAt: new Date(now.getTime() + policy.ttlMs).toISOString(),
        ...(after ? { after } : {}),
        ...(traceparent ? { traceparent } : {}),
        ...(a.share ? { share: a.share } : {}),
      };
      const record = newRunRecord({
        ...a,
        chosenBy,
        wait: request.wait,
        taskId,
        resumeId,
        workspaceId: workspace.id,
        agent: adapter.name,
        owner: this.$.instanceId,
        now: iso,
        queued,
        source,
      });
      await this.$.lifecycle.enqueue(record);
      await this.place(record);
      await this.$.events.queued(queuedEventOf({ ...record, queued })).catch((error: unknown) => this.$.log(`could not store the events of ${taskId}`, error));
      this.runner.kick();
      this.$.fleet.queue?.kick();
      return { record: await this.withPosition(record), done: this.$.lifecycle.waitFor(taskId) };
    } finally {
      this.enqueuing -= 1;
    }
  }

  /** Takes a queued run from the store and starts it here, unless it must wait on. */
  private async take(record: StoredRun): Promise<TakeResult> {
    const { taskId, resumeId, agent, queued } = record;
    if (!queued) return 'gone';
    if (queued.after !== undefined && !hasEnded((await this.$.records.find(queued.after))?.status ?? 'succeeded')) return 'waiting';
    let workspace: Workspace;
    let reservation: Reservation;
    try {
      workspace = await this.$.workspace(record.workspaceId);
      // Accepted by another member of a fleet: held to this one's own policy for the workspace.
      const loosened = record.spec && record.bootId !== this.$.instanceId ? this.$.loosens(workspace, { spec: record.spec, source: record.source }) : undefined;
      if (loosened) throw new Refusal('policy_loosened', `Field "${loosened.field}" cannot be loosened on the member that runs it: ${loosened.detail}.`);
      const decision = await this.$.admission.admitQueued(workspace, { agent, resumeId, taskId, resumes: queued.resumes, share: queued.share });
      if ('wait' in decision) return 'waiting';
      reservation = decision.admitted;
    } catch (error) {
      if (!(error instanceof Refusal) || NOT_YET.includes(error.code)) return 'waiting';
      await this.$.lifecycle.endQueued(taskId, { status: 'failed', error: { code: error.code, message: error.message } });
      return 'gone';
    }
    let taken: StoredRun | undefined;
    // Accepted by another instance (or an earlier boot): its workspace's own webhook as this instance defines it.
    const elsewhere = record.bootId !== this.$.instanceId;
    try {
      taken = await this.$.lifecycle.take(taskId, elsewhere ? { workspaceTargets: this.$.workspaceTargets(workspace) } : {});
    } catch (error) {
      this.$.log(`could not take ${taskId} from the queue; it is tried again`, error);
      await reservation.release();
      return 'refused';
    }
    if (!taken) {
      await reservation.release();
      return 'gone';
    }
    await this.launch(workspace, reservation, taken, queued);
    return 'started';
  }

  /** Starts the agent of a run just taken; a spawn failure ends it `failed` (its waiters are told by the ended path). */
  private async launch(workspace: Workspace, reservation: Reservation, taken: StoredRun, queued: QueuedStart): Promise<void> {
    const { taskId, resumeId } = taken;
    const { log } = this.$;
    const startedAt = taken.startedAt ?? new Date().toISOString();
    await this.$.sessions
      .update(resumeId, (s) => ({ lastRunAt: startedAt, runCount: s.runCount + 1 }))
      .catch((e: unknown) => log(`could not update Session ${resumeId}`, e));
    await this.$.events.resume(startedEventOf(taken)).catch((e: unknown) => log(`could not load the events of ${taskId}`, e));
    const { prompt, traceparent } = queued;
    // The address the start arrived at may be another instance's: its runs call back this one.
    const apiUrl = this.$.ownApiUrl() ?? queued.apiUrl;
    await this.$.launcher.launch({ workspace, prompt, apiUrl, reservation, record: taken, traceparent }).catch(() => undefined);
  }

  /** The public record, with its place in the queue while it is queued. */
  async withPosition(record: StoredRun): Promise<RunRecord> {
    if (record.status !== 'queued') return publicRecord(record);
    return { ...publicRecord(record), queuePosition: (await this.$.records.countInStatus('queued', record.taskId)) + 1 };
  }

  /** Records of a list page, each queued one with its place. */
  async positions(runs: RunRecord[]): Promise<RunRecord[]> {
    if (!runs.some((r) => r.status === 'queued')) return runs;
    const order = await this.ids();
    return runs.map((r) => (r.status === 'queued' && order.includes(r.taskId) ? { ...r, queuePosition: order.indexOf(r.taskId) + 1 } : r));
  }

  /** Cancels it if it is still queued; undefined if it is not. */
  async cancel(taskId: string): Promise<RunRecord | undefined> {
    const ended = await this.$.lifecycle.endQueued(taskId, 'cancelled');
    return ended ? publicRecord(ended) : undefined;
  }
}
