import { HttpProblem } from '../../contract/problems';
import { type RunRecord, hasEnded } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import type { Log } from '../logger';
import { publicRecord } from '../public-record';
import type { Admission, Reservation } from '../runs/admission';
import type { StartedRun } from '../runs/live-run';
import { newRunRecord, startedEvent } from '../runs/new-record';
import type { RunLauncher } from '../runs/run-launcher';
import type { RunRecords } from '../runs/records';
import type { RunEvents } from '../events/run-events';
import type { SessionBook } from '../sessions';
import type { RunOrigin, StoredRun, WebhookTarget, Workspace } from '../types';
import { runPolicy } from '../sandbox/policy';
import { newSortableId } from '../util/ids';
import type { QueuePolicy } from './queue-policy';
import { QueueRunner, type TakeResult } from './queue-runner';
import type { QueuedRuns } from './queued-runs';

/** How often the queue is read without a reason: expiries, and in a fleet slots freed elsewhere. */
const SWEEP_MS = 1000;
/** Problems that mean "not yet" for a run leaving the queue; any other means "never". */
const NOT_YET = ['session_busy', 'capacity_reached', 'workspace_not_found', 'shutting_down'];

export interface RunQueueDeps {
  queued: QueuedRuns;
  admission: Admission;
  sessions: SessionBook;
  records: RunRecords;
  events: RunEvents;
  launcher: RunLauncher;
  log: Log;
  instanceId: string;
  /** A workspace by id; throws `workspace_not_found` where this instance does not serve it. */
  workspace(id: string): Promise<Workspace>;
}

export interface EnqueueInput {
  workspace: Workspace;
  request: StartRequest;
  apiUrl: string;
  taskId?: string;
  policy: QueuePolicy;
  webhookTargets: WebhookTarget[];
  origin: RunOrigin;
}

/**
 * The queue in front of the run slots (docs/queue-and-schedules.md): accepts starts into it,
 * and starts them from it, oldest first, as slots (and their Sessions) free up.
 */
export class RunQueue {
  private readonly runner: QueueRunner;
  /** Starts being queued now, not yet counted in the store: the queue's bound holds on one instance. */
  private enqueuing = 0;

  constructor(private readonly $: RunQueueDeps) {
    this.runner = new QueueRunner({
      queued: $.queued,
      freeSlots: () => $.admission.free,
      find: (taskId) => $.records.find(taskId),
      take: (record) => this.take(record),
      log: $.log,
      sweepMs: SWEEP_MS,
    });
    $.admission.onFree(() => this.runner.kick());
  }

  start(): void {
    this.runner.start();
  }

  stop(): void {
    this.runner.stop();
  }

  /** Its Session made if new (so its `resumeId` can be given), then ONE write of the `queued` record; `429 queue_full` when full. */
  async enqueue(a: EnqueueInput): Promise<StartedRun> {
    const { workspace, request, policy } = a;
    const { adapter, known } = await this.$.admission.plan(workspace, request);
    if (known && !this.$.sessions.isResumable(known)) throw new HttpProblem('session_not_resumable', `Session "${known.resumeId}" cannot be resumed.`);
    this.enqueuing += 1;
    try {
      if ((await this.$.queued.count(policy, workspace.id)) + this.enqueuing > policy.max) {
        throw new HttpProblem('queue_full', `All run slots are busy and the queue holds ${policy.max} runs; retry later.`, { headers: { 'retry-after': '5' } });
      }
      const now = new Date();
      const iso = now.toISOString();
      const taskId = a.taskId ?? newSortableId('run_');
      const resumeId = known?.resumeId ?? newSortableId('ses_');
      if (!known)
        await this.$.sessions.create({ resumeId, workspaceId: workspace.id, agent: adapter.name, retired: false, createdAt: iso, lastRunAt: iso, runCount: 0 });
      const { after, schedule, scheduledFor } = a.origin;
      const expiresAt = new Date(now.getTime() + policy.ttlMs).toISOString();
      const { traceparent } = a.origin;
      const queued = {
        prompt: request.prompt,
        resumes: known !== undefined,
        apiUrl: a.apiUrl,
        expiresAt,
        ...(after ? { after } : {}),
        ...(traceparent ? { traceparent } : {}),
      };
      const record = newRunRecord({
        ...a,
        taskId,
        resumeId,
        workspaceId: workspace.id,
        agent: adapter.name,
        owner: this.$.instanceId,
        now: iso,
        queued,
        schedule,
        scheduledFor,
        policy: runPolicy(workspace, a.origin.policy),
      });
      await this.$.queued.enqueue(record);
      this.runner.kick();
      return { record: await this.withPosition(record), done: this.$.queued.waitFor(taskId) };
    } finally {
      this.enqueuing -= 1;
    }
  }

  /** Takes a queued run from the store and starts it here, unless it must wait on. */
  private async take(record: StoredRun): Promise<TakeResult> {
    const { taskId, resumeId, agent, queued } = record;
    if (queued!.after !== undefined && !hasEnded((await this.$.records.find(queued!.after))?.status ?? 'succeeded')) return 'waiting';
    let workspace: Workspace;
    let reservation: Reservation;
    try {
      workspace = await this.$.workspace(record.workspaceId);
      reservation = await this.$.admission.admitQueued(workspace, { agent, resumeId, taskId, resumes: queued!.resumes });
    } catch (error) {
      if (!(error instanceof HttpProblem) || NOT_YET.includes(error.code)) return 'waiting';
      await this.$.queued.end(taskId, { status: 'failed', error: { code: error.code, message: error.message } });
      return 'gone';
    }
    let taken: StoredRun | undefined;
    try {
      taken = await this.$.queued.take(taskId);
    } catch (error) {
      this.$.log(`could not take ${taskId} from the queue; it is tried again`, error);
      await reservation.release();
      return 'refused';
    }
    if (!taken) {
      await reservation.release();
      return 'gone';
    }
    await this.launch(workspace, reservation, taken, queued!);
    return 'started';
  }

  /** Starts the agent of a run just taken; its waiters are told when it ends. */
  private async launch(workspace: Workspace, reservation: Reservation, taken: StoredRun, queued: NonNullable<StoredRun['queued']>): Promise<void> {
    const { taskId, resumeId } = taken;
    const { log } = this.$;
    this.$.records.track(taken);
    await this.$.sessions
      .update(resumeId, (s) => ({ lastRunAt: taken.startedAt!, runCount: s.runCount + 1 }))
      .catch((e: unknown) => log(`could not update Session ${resumeId}`, e));
    const request = { wait: taken.mode === 'sync', title: taken.title, metadata: taken.metadata };
    await this.$.events
      .resume(startedEvent({ ...taken, request, schedule: taken.schedule }))
      .catch((e: unknown) => log(`could not load the events of ${taskId}`, e));
    // A spawn failure ends the run `failed` (its waiters are told by the launcher's end).
    const started = await this.$.launcher
      .launch({ workspace, prompt: queued.prompt, apiUrl: queued.apiUrl, reservation, record: taken, traceparent: queued.traceparent })
      .catch(() => undefined);
    const done = started?.done ?? this.$.records.find(taskId).then((r) => ({ record: publicRecord(r!), output: { stdout: '', stderr: '', truncated: false } }));
    void done.then(
      (result) => this.$.queued.settle(taskId, result),
      () => undefined,
    );
  }

  /** The public record, with its place in the queue while it is queued. */
  async withPosition(record: StoredRun): Promise<RunRecord> {
    const position = record.status === 'queued' ? await this.$.queued.position(record.taskId) : undefined;
    return { ...publicRecord(record), ...(position === undefined ? {} : { queuePosition: position }) };
  }

  /** Records of a list page, each queued one with its place. */
  async positions(runs: RunRecord[]): Promise<RunRecord[]> {
    if (!runs.some((r) => r.status === 'queued')) return runs;
    const order = await this.$.queued.ids();
    return runs.map((r) => (r.status === 'queued' && order.includes(r.taskId) ? { ...r, queuePosition: order.indexOf(r.taskId) + 1 } : r));
  }

  /** Cancels it if it is still queued; undefined if it is not. */
  async cancel(taskId: string): Promise<RunRecord | undefined> {
    const ended = await this.$.queued.end(taskId, 'cancelled');
    return ended ? publicRecord(ended) : undefined;
  }
}
