import { HttpProblem } from '../../contract/problems';
import type { Log } from '../logger';
import type { ServiceObserver } from '../telemetry/observer';
import type { RunRecord } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import { viewOf } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { Fleet, FleetAnswer, FleetRequest } from '../fleet/fleet';
import { MACHINE } from '../process/machine';
import { type ProcessOutput, SpawnFailure, type Spawner } from '../process/spawner';
import { publicRecord } from '../public-record';
import { settleWithin } from '../util/settle-within';
import type { SessionBook } from '../sessions';
import type { StoredRun, WebhookTarget, Workspace } from '../types';
import type { Admission, Reservation } from './admission';
import { cancelElsewhere } from './cancel';
import { type LiveRun, type RunOutputView, type ServiceStop, type StartedRun, newLiveRun } from './live-run';
import { newRunRecord, startedEvent } from './new-record';
import { type ListQuery, listRuns } from './run-list';
import { emptyEnd, processOutcome } from './ending';
import { KILL_GRACE_MS, launchProcess } from './launch';
import { runVariables } from './env';
import { outputPipe } from './output-pipe';
import { tailOf } from './output-tail';
import { inWorkspace } from './placement';
import type { RunRecords } from './records';
import { InboxCommand } from './inbox-command';
import { RunEnding } from './run-ending';
import { takeOverRuns } from './recovery';
import type { RunTokens } from './tokens';

/** Shutdown must finish within the daemon's 10 s, so its grace is shorter. */
const SHUTDOWN_GRACE_MS = 2000;
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
}

/**
 * The run lifecycle, composed: admission takes a slot and the Session, the record is made
 * durable, the supervisor runs the process, and on its end the outcome is judged, the
 * reservation released and the final record stored; only then is the outcome announced.
 */
export class RunService {
  private readonly live = new Map<string, LiveRun>();
  private readonly admission: Admission;
  private readonly records: RunRecords;
  private readonly bootId: string;
  private readonly placement;
  private readonly ending: RunEnding;
  private readonly inboxCommand = new InboxCommand();

  constructor(private readonly o: RunServiceOptions) {
    this.admission = o.admission;
    this.records = o.records;
    this.bootId = o.fleet.instanceId;
    this.placement = inWorkspace(o.spawner);
    this.ending = new RunEnding({ ...o, forget: (taskId) => this.live.delete(taskId) });
  }

  /** Loads what start-up needs. */
  async load(): Promise<void> {
    await this.admission.loadLastAgents();
    await this.records.load();
  }

  /** Interrupts the runs that gone instances left `running` (an earlier boot's, at start-up). */
  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<number> {
    const { events, webhooks, sessions, log } = this.o;
    const shared = this.o.fleet.shared;
    return takeOverRuns({ records: this.records, events, webhooks, sessions, log, isGone, shared, instanceId: this.bootId, isLive: (id) => this.live.has(id) });
  }

  /** Acts on another instance's request about a run of this one. */
  async answer(request: FleetRequest): Promise<FleetAnswer> {
    if (!this.live.has(request.taskId)) return { ok: false, code: 'run_not_running', message: `Run "${request.taskId}" has already ended.` };
    await this.cancel(request.taskId);
    return { ok: true };
  }

  /** This instance's lease ran out and its runs were recorded `interrupted` elsewhere: they are stopped. */
  abandon(): void {
    for (const live of this.live.values()) this.stop(live, 'shutdown');
  }

  /** Starts a run; `taskId` is the id an idempotent start planned for it. */
  async start(workspace: Workspace, request: StartRequest, apiUrl: string, taskId?: string): Promise<StartedRun> {
    const webhookTargets = this.o.webhooks.targetsFor(workspace, request.webhook);
    const reservation = await this.admission.admit(workspace, request, taskId);
    const { resumeId, adapter } = reservation;
    // Opened first, so a reader who learns of the run finds its timeline.
    this.o.events.open(startedEvent({ taskId: reservation.taskId, resumeId, workspaceId: workspace.id, agent: adapter.name, request }));
    let record: StoredRun;
    try {
      record = await this.admitRecord(workspace, request, reservation, webhookTargets);
    } catch (error) {
      this.o.events.discard(reservation.taskId);
      this.records.untrack(reservation.taskId);
      await reservation.release();
      throw error;
    }
    this.admission.rememberAgent(workspace.id, adapter.name);
    return this.launch(workspace, request, apiUrl, reservation, record);
  }

  /** Makes the Session and the `running` record durable; nothing is acknowledged before. */
  private async admitRecord(workspace: Workspace, request: StartRequest, reservation: Reservation, webhookTargets: WebhookTarget[]): Promise<StoredRun> {
    const { adapter, resumeId, taskId } = reservation;
    const now = new Date().toISOString();
    if (reservation.session) await this.o.sessions.update(resumeId, (s) => ({ lastRunAt: now, runCount: s.runCount + 1 }));
    else
      await this.o.sessions.create({ resumeId, workspaceId: workspace.id, agent: adapter.name, retired: false, createdAt: now, lastRunAt: now, runCount: 1 });
    const record = newRunRecord({ taskId, resumeId, workspaceId: workspace.id, agent: adapter.name, request, owner: this.bootId, webhookTargets, now });
    await this.records.create(record);
    return record;
  }

  /** Starts the admitted run's process. From here on, finalisation releases the reservation. */
  private async launch(workspace: Workspace, request: StartRequest, apiUrl: string, reservation: Reservation, record: StoredRun): Promise<StartedRun> {
    const { taskId, resumeId } = record;
    const input = { prompt: request.prompt, resumeId, agentSessionId: reservation.session?.agentSessionId };
    const parser = reservation.adapter.parser({ ...input, workspacePath: workspace.path });
    const live = newLiveRun({ taskId, reservation, parser, resumedFrom: input.agentSessionId });
    this.live.set(taskId, live);
    const token = this.o.tokens.issue({ taskId, workspaceId: workspace.id, resumeId });
    try {
      live.process = await launchProcess({
        adapter: reservation.adapter,
        input,
        workspace,
        placement: this.placement,
        timeoutMs: record.timeoutMs,
        baseEnv: this.o.baseEnv,
        adminToken: this.o.adminToken,
        binDir: this.inboxCommand.folder(),
        run: runVariables({ apiUrl, workspaceId: workspace.id, taskId, resumeId, token }),
        onStdoutLine: outputPipe({
          taskId,
          adapterName: reservation.adapter.name,
          parser,
          events: this.o.events,
          log: this.o.log,
          onSessionId: (id) => this.ending.noteSession(live, id),
        }),
      });
    } catch (error) {
      const message = error instanceof SpawnFailure ? error.message : 'the agent process could not be started';
      if (!(error instanceof SpawnFailure)) this.o.log('spawn failed', error);
      await this.ending.finalize(live, { ...emptyEnd, runtimeError: { code: 'spawn_failed', message } });
      throw new HttpProblem('spawn_failed', message, { extra: { taskId } });
    }
    const proc = live.process;
    if (live.pendingStop) this.stop(live, live.pendingStop);
    const where = { pid: proc.pid, startTime: proc.startTime, machine: MACHINE };
    live.processSaved = this.records.update(taskId, (r) => (r.status === 'running' ? { ...r, process: where } : undefined));
    proc.ended
      .then((end) => {
        if (end.lost !== undefined) this.o.log(`lost track of the process of ${taskId}`, end.lost);
        return this.ending.finalize(live, processOutcome(end));
      })
      .catch((error: unknown) => this.o.log(`could not finalise ${taskId}`, error));
    try {
      await live.processSaved;
    } catch (error) {
      // Without a durable record of its process, crash recovery could not find the run: stop it.
      proc.stop('unrecorded', 0);
      throw error;
    }
    this.o.observe.runStarted(this.records.current(taskId) ?? record);
    return { record: publicRecord(this.records.current(taskId) ?? record), done: live.done };
  }

  private async find(taskId: string): Promise<StoredRun | undefined> {
    return this.records.current(taskId) ?? (await this.records.find(taskId));
  }

  async get(taskId: string): Promise<RunRecord> {
    const stored = await this.find(taskId);
    if (!stored) throw new HttpProblem('run_not_found', `No run "${taskId}".`);
    return stored.webhookTargets ? { ...publicRecord(stored), webhooks: viewOf(stored) } : publicRecord(stored);
  }

  /** A run's record, with its stored output once it has ended; undefined if there is no such run. */
  async result(taskId: string): Promise<{ record: RunRecord; output?: ProcessOutput } | undefined> {
    const stored = await this.find(taskId);
    if (!stored) return undefined;
    const output = stored.status === 'running' ? undefined : await this.records.output(taskId);
    return { record: publicRecord(stored), ...(output ? { output } : {}) };
  }

  /** The last `bytes` bytes of each stream of a run, running or ended. */
  async output(taskId: string, bytes: number): Promise<RunOutputView> {
    const live = this.live.get(taskId);
    const record = await this.get(taskId);
    const output = live?.process && !live.ending ? live.process.output() : await this.records.output(taskId);
    return { taskId, status: record.status, ...tailOf(output, bytes), retained: output !== undefined };
  }

  list(query: ListQuery): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    return listRuns(this.records, (id) => this.find(id), query);
  }

  /** Cancels a run of this instance, or asks the instance that runs it. */
  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.live.get(taskId);
    if (!live) return cancelElsewhere({ find: (id) => this.find(id), fleet: this.o.fleet, instanceId: this.bootId }, taskId);
    const stopReason = live.process?.stopReason ?? live.pendingStop;
    if (live.ending || (stopReason !== undefined && stopReason !== 'cancel')) throw new HttpProblem('run_not_running', `Run "${taskId}" is already stopping.`);
    this.stop(live, 'cancel');
    return publicRecord(this.records.current(taskId)!);
  }

  private stop(live: LiveRun, reason: ServiceStop): void {
    if (live.process) live.process.stop(reason, reason === 'shutdown' ? SHUTDOWN_GRACE_MS : KILL_GRACE_MS);
    else live.pendingStop ??= reason;
  }

  /** Refuses new starts, stops every running run (recorded `interrupted`) and waits, bounded. */
  async shutdown(): Promise<void> {
    this.admission.close();
    const runs = [...this.live.values()];
    for (const live of runs) this.stop(live, 'shutdown');
    await settleWithin(
      runs.map((r) => r.done),
      SHUTDOWN_WAIT_MS,
    );
    await this.o.events.close();
    await this.records.close();
    this.inboxCommand.close();
  }
}
