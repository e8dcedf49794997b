import { HttpProblem } from '../../contract/problems';
import { hasEnded, type RunRecord } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import { viewOf } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { Fleet, FleetAnswer, FleetRequest } from '../fleet/fleet';
import type { Log } from '../logger';
import type { Spawner } from '../process/spawner';
import type { ProcessOutput } from '../process/spawner';
import { publicRecord } from '../public-record';
import { type QueuePolicy, queuePolicy } from '../queue/queue-policy';
import { QueuedRuns } from '../queue/queued-runs';
import { RunQueue } from '../queue/run-queue';
import type { SessionBook } from '../sessions';
import type { ServiceObserver } from '../telemetry/observer';
import type { QueueSettings, RunOrigin, StoredRun, WebhookTarget, Workspace } from '../types';
import { settleWithin } from '../util/settle-within';
import type { Admission, Reservation } from './admission';
import { cancelElsewhere } from './cancel';
import type { RunOutputView, StartedRun } from './live-run';
import { newRunRecord, startedEvent } from './new-record';
import { runPolicy } from '../sandbox/policy';
import type { Sandbox } from '../sandbox/sandbox';
import type { RunTracing } from '../telemetry/run-tracing';
import type { RunRecords } from './records';
import { takeOverRuns } from './recovery';
import { RunLauncher } from './run-launcher';
import { type ListQuery, listRuns } from './run-list';
import { tailOf } from './output-tail';
import type { RunTokens } from './tokens';

const SHUTDOWN_WAIT_MS = 6000;

export interface RunServiceOptions {
  admission: Admission;
  sessions: SessionBook;
  tokens: RunTokens;
  spawner: Spawner;
  events: RunEvents;
  webhooks: Webhooks;
  fleet: Fleet;
  records: RunRecords;
  adminToken?: string;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  log: Log;
  /** Told of each run's start and end (the logs, the metrics). */
  observe: ServiceObserver;
  /** Confines the runs whose policy asks for a sandbox. */
  sandbox: Sandbox;
  /** A span per run, where traces are on. */
  tracing?: RunTracing;
  /** The installation's queue; workspaces may set their own. */
  queue?: QueueSettings;
  /** A workspace by id, for a queued run taken from the store; throws `workspace_not_found` if this instance does not serve it. */
  workspace(id: string): Promise<Workspace>;
}

/** A start that may wait in the queue instead of being refused. */
const queueable = (error: unknown, request: StartRequest) =>
  error instanceof HttpProblem && (error.code === 'capacity_reached' || (error.code === 'session_busy' && request.waitForSession === true));

/**
 * The run lifecycle, composed: admission takes a slot and the Session, the record is made
 * durable, the launcher runs the process and ends it (releasing the reservation, storing the
 * final record, and only then announcing it). A start that finds no slot (or, when asked, its
 * Session busy) waits in the queue where one is configured; the queue runner starts it later.
 */
export class RunService {
  private readonly admission: Admission;
  private readonly records: RunRecords;
  private readonly bootId: string;
  private readonly launcher: RunLauncher;
  private readonly queue: RunQueue;

  constructor(private readonly o: RunServiceOptions) {
    this.admission = o.admission;
    this.records = o.records;
    this.bootId = o.fleet.instanceId;
    this.launcher = new RunLauncher(o);
    const instanceId = this.bootId;
    const queued = new QueuedRuns({ ...o, instanceId });
    this.queue = new RunQueue({ ...o, queued, launcher: this.launcher, instanceId });
  }

  /** Loads what start-up needs. */
  async load(): Promise<void> {
    await this.admission.loadLastAgents();
    await this.records.load();
  }

  /** Starts taking runs from the queue (after crash recovery). */
  startQueue(): void {
    this.queue.start();
  }

  /** Interrupts the runs that gone instances left `running` (an earlier boot's, at start-up). */
  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<number> {
    const { events, webhooks, sessions, log } = this.o;
    const shared = this.o.fleet.shared;
    const isLive = (id: string) => this.launcher.get(id) !== undefined;
    return takeOverRuns({ records: this.records, events, webhooks, sessions, log, isGone, shared, instanceId: this.bootId, isLive });
  }

  /** Acts on another instance's request about a run of this one. */
  async answer(request: FleetRequest): Promise<FleetAnswer> {
    if (!this.launcher.get(request.taskId)) return { ok: false, code: 'run_not_running', message: `Run "${request.taskId}" has already ended.` };
    await this.cancel(request.taskId);
    return { ok: true };
  }

  /** This instance's lease ran out and its runs were recorded `interrupted` elsewhere: they are stopped. */
  abandon(): void {
    for (const live of this.launcher.all()) this.launcher.stop(live, 'shutdown');
  }

  /** Starts a run, or queues it; `taskId` is the id an idempotent start planned for it. */
  async start(workspace: Workspace, request: StartRequest, apiUrl: string, taskId?: string, origin: RunOrigin = {}): Promise<StartedRun> {
    const webhookTargets = this.o.webhooks.targetsFor(workspace, request.webhook);
    const enqueue = (policy: QueuePolicy) => this.queue.enqueue({ workspace, request, apiUrl, taskId, policy, webhookTargets, origin });
    const before = origin.after === undefined ? undefined : await this.find(origin.after);
    // Behind a run that has not ended (a schedule's overlap "queue"): queued, with or without a queue configured.
    if (before && !hasEnded(before.status)) return enqueue(queuePolicy(this.o.queue, workspace) ?? queuePolicy({}, {})!);
    let reservation: Reservation;
    try {
      reservation = await this.admission.admit(workspace, request, taskId);
    } catch (error) {
      const policy = queuePolicy(this.o.queue, workspace);
      if (!policy || !queueable(error, request)) throw error;
      return enqueue(policy);
    }
    const { resumeId, adapter } = reservation;
    const { schedule } = origin;
    // Opened first, so a reader who learns of the run finds its timeline.
    this.o.events.open(startedEvent({ taskId: reservation.taskId, resumeId, workspaceId: workspace.id, agent: adapter.name, request, schedule }));
    let record: StoredRun;
    try {
      record = await this.admitRecord(workspace, request, reservation, webhookTargets, origin);
    } catch (error) {
      this.o.events.discard(reservation.taskId);
      this.records.untrack(reservation.taskId);
      await reservation.release();
      throw error;
    }
    this.admission.rememberAgent(workspace.id, adapter.name);
    return this.launcher.launch({ workspace, prompt: request.prompt, apiUrl, reservation, record, traceparent: origin.traceparent });
  }

  /** Makes the Session and the `running` record durable; nothing is acknowledged before. */
  private async admitRecord(
    workspace: Workspace,
    request: StartRequest,
    reservation: Reservation,
    webhookTargets: WebhookTarget[],
    origin: RunOrigin,
  ): Promise<StoredRun> {
    const { adapter, resumeId, taskId } = reservation;
    const now = new Date().toISOString();
    if (reservation.session) await this.o.sessions.update(resumeId, (s) => ({ lastRunAt: now, runCount: s.runCount + 1 }));
    else
      await this.o.sessions.create({ resumeId, workspaceId: workspace.id, agent: adapter.name, retired: false, createdAt: now, lastRunAt: now, runCount: 1 });
    const record = newRunRecord({
      taskId,
      resumeId,
      workspaceId: workspace.id,
      agent: adapter.name,
      request,
      owner: this.bootId,
      webhookTargets,
      now,
      schedule: origin.schedule,
      scheduledFor: origin.scheduledFor,
      policy: runPolicy(workspace, origin.policy),
    });
    await this.records.create(record);
    return record;
  }

  private async find(taskId: string): Promise<StoredRun | undefined> {
    return this.records.current(taskId) ?? (await this.records.find(taskId));
  }

  async get(taskId: string): Promise<RunRecord> {
    const stored = await this.find(taskId);
    if (!stored) throw new HttpProblem('run_not_found', `No run "${taskId}".`);
    const record = await this.queue.withPosition(stored);
    return stored.webhookTargets ? { ...record, webhooks: viewOf(stored) } : record;
  }

  /** A run's record, with its stored output once it has ended; undefined if there is no such run. */
  async result(taskId: string): Promise<{ record: RunRecord; output?: ProcessOutput } | undefined> {
    const stored = await this.find(taskId);
    if (!stored) return undefined;
    const output = hasEnded(stored.status) ? await this.records.output(taskId) : undefined;
    return { record: publicRecord(stored), ...(output ? { output } : {}) };
  }

  /** The last `bytes` bytes of each stream of a run, running or ended. */
  async output(taskId: string, bytes: number): Promise<RunOutputView> {
    const live = this.launcher.get(taskId);
    const record = await this.get(taskId);
    const output = live?.process && !live.ending ? live.process.output() : await this.records.output(taskId);
    return { taskId, status: record.status, ...tailOf(output, bytes), retained: output !== undefined };
  }

  async list(query: ListQuery): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    const page = await listRuns(this.records, (id) => this.find(id), query);
    return { ...page, runs: await this.queue.positions(page.runs) };
  }

  /** Cancels a run of this instance, a queued run, or asks the instance that runs it. */
  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.launcher.get(taskId);
    if (!live) {
      const ended = (await this.find(taskId))?.status === 'queued' ? await this.queue.cancel(taskId) : undefined;
      if (ended) return ended;
      return cancelElsewhere({ find: (id) => this.find(id), fleet: this.o.fleet, instanceId: this.bootId }, taskId);
    }
    const stopReason = live.process?.stopReason ?? live.pendingStop;
    if (live.ending || (stopReason !== undefined && stopReason !== 'cancel')) throw new HttpProblem('run_not_running', `Run "${taskId}" is already stopping.`);
    this.launcher.stop(live, 'cancel');
    return publicRecord(this.records.current(taskId)!);
  }

  /** Refuses new starts, stops every running run (recorded `interrupted`) and waits, bounded; queued runs stay queued. */
  async shutdown(): Promise<void> {
    this.admission.close();
    this.queue.stop();
    const runs = this.launcher.all();
    for (const live of runs) this.launcher.stop(live, 'shutdown');
    await settleWithin(
      runs.map((r) => r.done),
      SHUTDOWN_WAIT_MS,
    );
    await this.o.events.close();
    await this.records.close();
    this.launcher.close();
  }
}
