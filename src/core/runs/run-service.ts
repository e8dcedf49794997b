import { HttpProblem, StorageError } from '../../contract/problems';
import type { RunRecord, RunStatus } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import type { AgentRegistry } from '../agents/registry';
import type { AgentOutputParser } from '../agents/types';
import { owe, viewOf } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import { type Fleet, type FleetAnswer, type FleetRequest, MACHINE } from '../fleet/fleet';
import type { ProcessOutput, Spawner } from '../process/spawner';
import { SpawnFailure } from '../process/spawner';
import { publicRecord } from '../public-record';
import type { SessionBook } from '../sessions';
import type { HeadlessStore } from '../store/keyv-store';
import type { StoredRun, WebhookTarget, Workspace } from '../types';
import { Admission, type Reservation } from './admission';
import { type EndInput, emptyEnd, finalChange, processOutcome, settleSession } from './ending';
import { KILL_GRACE_MS, launchProcess } from './launch';
import { outputPipe } from './output-pipe';
import { tailOf } from './output-tail';
import { inWorkspace } from './placement';
import type { RunRecords } from './records';
import { takeOverRuns } from './recovery';
import type { SupervisedProcess } from './supervisor';
import type { RunTokens } from './tokens';

/** Shutdown must finish within the daemon's 10 s, so its grace is shorter. */
const SHUTDOWN_GRACE_MS = 2000;
const SHUTDOWN_WAIT_MS = 6000;

/** A run's output tail: live while it runs, stored when it ends. */
export interface RunOutputView extends ProcessOutput {
  taskId: string;
  status: RunStatus;
  /** False when none was kept: the service died while it ran, or the store refused it. */
  retained: boolean;
}

export interface RunResult {
  record: RunRecord;
  output: ProcessOutput;
}

export interface StartedRun {
  record: RunRecord;
  /** Settles once, with the final record, when the run has ended and its record is stored; rejects with StorageError if the store refuses it. */
  done: Promise<RunResult>;
}

/** A run between admission and its durable final record. Its record is `records.current(taskId)`. */
interface LiveRun {
  taskId: string;
  reservation: Reservation;
  parser: AgentOutputParser;
  /** The agent's own session id this run resumed, if it resumed one. */
  resumedFrom?: string;
  process?: SupervisedProcess;
  /** A stop asked for while the process was still being spawned; applied once it is. */
  pendingStop?: ServiceStop;
  /** The write of the record with its process, awaited before the final write so it cannot land after it. */
  processSaved?: Promise<unknown>;
  /** Its process has ended: its final record is being stored. */
  ending: boolean;
  resolve: (result: RunResult) => void;
  reject: (error: Error) => void;
  done: Promise<RunResult>;
}

export interface RunServiceOptions {
  store: HeadlessStore;
  registry: AgentRegistry;
  sessions: SessionBook;
  tokens: RunTokens;
  spawner: Spawner;
  events: RunEvents;
  webhooks: Webhooks;
  fleet: Fleet;
  records: RunRecords;
  maxConcurrentRuns: number;
  defaultAgent?: string;
  adminToken?: string;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  log: (message: string, error?: unknown) => void;
}

/** The stops the service asks for by itself (the watchdog and a refused record are the supervisor's). */
type ServiceStop = 'cancel' | 'shutdown';

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

  constructor(private readonly o: RunServiceOptions) {
    this.admission = new Admission({
      registry: o.registry,
      sessions: o.sessions,
      store: o.store,
      maxConcurrentRuns: o.maxConcurrentRuns,
      shared: o.fleet.shared,
      defaultAgent: o.defaultAgent,
      baseEnv: o.baseEnv,
      log: o.log,
    });
    this.records = o.records;
    this.bootId = o.fleet.instanceId;
    this.placement = inWorkspace(o.spawner);
  }

  /** Loads what start-up needs. */
  async load(): Promise<void> {
    await this.admission.loadLastAgents();
    await this.records.load();
  }

  /** Interrupts the runs that gone instances left `running` (an earlier boot's, at start-up). */
  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<number> {
    const { events, webhooks, sessions, log } = this.o;
    return takeOverRuns({ records: this.records, events, webhooks, sessions, log, isGone, instanceId: this.bootId, isLive: (id) => this.live.has(id) });
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
    const mode = request.wait ? 'sync' : 'async';
    // Opened first, so a reader who learns of the run finds its timeline.
    this.o.events.open({ taskId: reservation.taskId, resumeId, workspaceId: workspace.id, agent: adapter.name, mode });
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
    const record: StoredRun = {
      taskId,
      resumeId,
      workspaceId: workspace.id,
      agent: adapter.name,
      mode: request.wait ? 'sync' : 'async',
      status: 'running',
      createdAt: now,
      endedAt: null,
      durationMs: null,
      timeoutMs: request.timeoutMs,
      exitCode: null,
      signal: null,
      bootId: this.bootId,
      ...(webhookTargets.length > 0 ? { webhookTargets } : {}),
    };
    await this.records.create(record);
    return record;
  }

  /** Starts the admitted run's process. From here on, finalisation releases the reservation. */
  private async launch(workspace: Workspace, request: StartRequest, apiUrl: string, reservation: Reservation, record: StoredRun): Promise<StartedRun> {
    const { taskId, resumeId } = record;
    const input = { prompt: request.prompt, resumeId, agentSessionId: reservation.session?.agentSessionId };
    const parser = reservation.adapter.parser({ ...input, workspacePath: workspace.path });
    let resolve!: LiveRun['resolve'];
    let reject!: LiveRun['reject'];
    const done = new Promise<RunResult>((ok, fail) => {
      resolve = ok;
      reject = fail;
    });
    done.catch(() => undefined);
    const live: LiveRun = { taskId, reservation, parser, resumedFrom: input.agentSessionId, ending: false, resolve, reject, done };
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
        run: {
          HEADLESS_API_URL: apiUrl,
          HEADLESS_WORKSPACE_ID: workspace.id,
          HEADLESS_TASK_ID: taskId,
          HEADLESS_RESUME_ID: resumeId,
          HEADLESS_RUN_TOKEN: token,
        },
        onStdoutLine: outputPipe({
          taskId,
          adapterName: reservation.adapter.name,
          parser,
          events: this.o.events,
          log: this.o.log,
          onSessionId: (id) => this.noteSession(live, id),
        }),
      });
    } catch (error) {
      const message = error instanceof SpawnFailure ? error.message : 'the agent process could not be started';
      if (!(error instanceof SpawnFailure)) this.o.log('spawn failed', error);
      await this.finalize(live, { ...emptyEnd, runtimeError: { code: 'spawn_failed', message } });
      throw new HttpProblem('spawn_failed', message, { extra: { taskId } });
    }
    const proc = live.process;
    if (live.pendingStop) this.stop(live, live.pendingStop);
    const where = { pid: proc.pid, startTime: proc.startTime, machine: MACHINE };
    live.processSaved = this.records.update(taskId, (r) => (r.status === 'running' ? { ...r, process: where } : undefined));
    proc.ended
      .then((end) => {
        if (end.lost !== undefined) this.o.log(`lost track of the process of ${taskId}`, end.lost);
        return this.finalize(live, processOutcome(end));
      })
      .catch((error: unknown) => this.o.log(`could not finalise ${taskId}`, error));
    try {
      await live.processSaved;
    } catch (error) {
      // Without a durable record of its process, crash recovery could not find the run: stop it.
      proc.stop('unrecorded', 0);
      throw error;
    }
    return { record: publicRecord(this.records.current(taskId) ?? record), done };
  }

  /** The agent printed its session id: one write records it with the agent.session deliveries it owes. */
  private noteSession(live: LiveRun, agentSessionId: string): void {
    const { taskId } = live;
    const at = new Date().toISOString();
    this.o.events.append(taskId, 'agent.session', { resumeId: live.reservation.resumeId });
    void this.records
      .update(taskId, (r) => (r.status === 'running' ? owe({ ...r, agentSessionId }, 'agent.session', at) : undefined))
      .then(async (run) => {
        // The Session follows the record (recovery settles it from the record too), then the webhooks go.
        await this.o.sessions.noteAgentSessionId(live.reservation.resumeId, agentSessionId);
        if (run) this.o.webhooks.schedule(run);
      })
      .catch((error: unknown) => this.o.log(`could not record the agent session of ${taskId}`, error));
  }

  /** Judges the outcome, releases the reservation and stores the final record; announces it once durable. Runs once per run. */
  private async finalize(live: LiveRun, end: EndInput): Promise<void> {
    live.ending = true;
    const { taskId, reservation } = live;
    const record = this.records.current(taskId)!;
    const { fields, failedUnanswered, agentSessionId } = finalChange({ live, end, record, log: this.o.log });
    await settleSession(this.o.sessions, record.resumeId, failedUnanswered ? { reset: live.resumedFrom } : { note: agentSessionId });
    this.o.tokens.revoke(taskId);
    await reservation.release();
    await live.processSaved?.catch(() => undefined);
    const change = (r: StoredRun) => (r.status === 'running' ? owe({ ...r, ...fields }, 'run.ended', fields.endedAt) : undefined);
    const inTime = await this.records.finish(taskId, change, (final) => this.announce(live, final, end.output));
    if (!inTime) live.reject(new StorageError(`the final record of ${taskId} could not be stored yet; it is retried`));
  }

  /** The final record is durable: now its output, timeline end, webhooks and waiters are told. */
  private async announce(live: LiveRun, final: StoredRun, output: ProcessOutput): Promise<void> {
    await this.records.saveOutput(live.taskId, output);
    this.o.webhooks.schedule(final);
    await this.o.events.end(publicRecord(final));
    this.records.untrack(live.taskId);
    this.live.delete(live.taskId);
    live.resolve({ record: publicRecord(final), output });
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

  async list(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    const page = await this.records.page(workspaceId, status, limit, cursor);
    const runs = await Promise.all(page.ids.map((id) => this.find(id)));
    // A record read after its lookup may have changed state since: the list shows what it is now.
    const shown = runs.filter((r): r is StoredRun => r !== undefined && (status === undefined || r.status === status));
    return { runs: shown.map(publicRecord), nextCursor: page.next };
  }

  /** Cancels a run of this instance, or asks the instance that runs it. */
  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.live.get(taskId);
    if (!live) return this.cancelElsewhere(taskId);
    const stopReason = live.process?.stopReason ?? live.pendingStop;
    if (live.ending || (stopReason !== undefined && stopReason !== 'cancel')) throw new HttpProblem('run_not_running', `Run "${taskId}" is already stopping.`);
    this.stop(live, 'cancel');
    return publicRecord(this.records.current(taskId)!);
  }

  private async cancelElsewhere(taskId: string): Promise<RunRecord> {
    const stored = await this.find(taskId);
    if (!stored) throw new HttpProblem('run_not_found', `No run "${taskId}".`);
    if (stored.status !== 'running' || stored.bootId === this.bootId) throw new HttpProblem('run_not_running', `Run "${taskId}" has already ended.`);
    const answer = await this.o.fleet.ask(stored.bootId, { op: 'cancel', taskId });
    if (answer.ok) return publicRecord(stored);
    // No answer: the owner may have died and its run been taken over meanwhile.
    if (answer.code === 'run_owner_unreachable' && (await this.find(taskId))?.status !== 'running') {
      throw new HttpProblem('run_not_running', `Run "${taskId}" has already ended.`);
    }
    throw new HttpProblem(answer.code, answer.message, answer.code === 'run_owner_unreachable' ? { headers: { 'retry-after': '5' } } : {});
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
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(runs.map((r) => r.done)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    await this.o.events.close();
    await this.records.close();
  }
}
