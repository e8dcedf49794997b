import type { AgentRegistry } from '../agents/registry';
import { preflight } from '../agents/preflight';
import type { AgentOutputParser, AgentVerdict } from '../agents/types';
import { buildRunEnv } from './env';
import { HttpProblem } from '../../contract/problems';
import { Admission, type Reservation } from './admission';
import { judgeOutcome } from './outcome';
import { clip } from '../util/text';
import { tailOf } from './output-tail';
import { RunRecords, publicRecord } from './records';
import { type RunEvents, fromAgentEvent } from '../events/run-events';
import { type Fleet, type FleetAnswer, type FleetRequest, MACHINE } from '../fleet/fleet';
import { takeOverRuns } from './recovery';
import { type ProcessEnd, type SupervisedProcess, superviseProcess } from './supervisor';
import type { RunTokens } from './tokens';
import type { StartRequest } from '../../contract/requests';
import type { SessionBook } from '../sessions';
import { type ProcessOutput, SpawnFailure, type Spawner } from '../process/spawner';
import type { HeadlessStore } from '../store/keyv-store';
import type { RunError, RunRecord, RunStatus } from '../../contract/records';
import type { SessionState, StoredRun, Workspace } from '../types';
import type { WebhookTarget } from '../types';
import type { Webhooks } from '../delivery/webhooks';

/** Grace between SIGTERM and SIGKILL for the watchdog and cancel. */
const KILL_GRACE_MS = 5000;
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

const LAST_MESSAGE_MAX = 4000;

export interface RunResult {
  record: RunRecord;
  output: ProcessOutput;
}

export interface StartedRun {
  record: RunRecord;
  /** Settles once, with the final record, when the run has ended and its record is stored. */
  done: Promise<RunResult>;
}

/** A run between admission and its final record. */
interface LiveRun {
  record: StoredRun;
  reservation: Reservation;
  parser: AgentOutputParser;
  /** The agent's own session id this run resumed, if it resumed one. */
  resumedFrom?: string;
  process?: SupervisedProcess;
  /** A stop asked for while the process was still being spawned; applied once it is. */
  pendingStop?: ServiceStop;
  /** The write of the record with its process, awaited before the final write so it cannot land after it. */
  processSaved?: Promise<unknown>;
  resolve: (result: RunResult) => void;
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
  maxConcurrentRuns: number;
  defaultAgent?: string;
  adminToken?: string;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  log: (message: string, error?: unknown) => void;
}

/** The stops the service asks for by itself (the watchdog and a refused record are the supervisor's). */
type ServiceStop = 'cancel' | 'shutdown';

const emptyOutput: ProcessOutput = { stdout: '', stderr: '', truncated: false };

/**
 * The run lifecycle, composed: admission takes a slot and the Session, the record is made
 * durable, the supervisor runs the process, and on its end the outcome is judged, the
 * reservation released and the final record stored. Reads go to the live run first.
 */
export class RunService {
  private readonly live = new Map<string, LiveRun>();
  private readonly admission: Admission;
  /** The stored runs; retention prunes through them. */
  readonly records: RunRecords;
  private readonly bootId: string;

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
    this.records = new RunRecords({ store: o.store, log: o.log });
    this.bootId = o.fleet.instanceId;
  }

  /** Loads what start-up needs. */
  async load(): Promise<void> {
    await this.admission.loadLastAgents();
    await this.records.load();
  }

  /** Interrupts the runs that gone instances left `running` (an earlier boot's, at start-up). */
  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<number> {
    const { events, webhooks, log } = this.o;
    return takeOverRuns({ records: this.records, events, webhooks, log, isGone, isLive: (taskId) => this.live.has(taskId) });
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

  async start(workspace: Workspace, request: StartRequest, apiUrl: string): Promise<StartedRun> {
    const webhookTargets = this.o.webhooks.targetsFor(workspace, request.webhook);
    const reservation = await this.admission.admit(workspace, request);
    const { taskId, resumeId, adapter } = reservation;
    // Opened first, so a reader who learns of the run finds its timeline.
    this.o.events.open({ taskId, resumeId, workspaceId: workspace.id, agent: adapter.name, mode: request.wait ? 'sync' : 'async' });
    let record: StoredRun;
    let session: SessionState;
    try {
      ({ record, session } = await this.admitRecord(workspace, request, reservation, webhookTargets));
    } catch (error) {
      this.o.events.discard(taskId);
      await reservation.release();
      throw error;
    }
    this.admission.rememberAgent(workspace.id, reservation.adapter.name);
    return this.launch({ workspace, request, apiUrl, reservation, record, session });
  }

  /** Makes the Session and the `running` record durable; nothing is acknowledged before. */
  private async admitRecord(workspace: Workspace, request: StartRequest, reservation: Reservation, webhookTargets: WebhookTarget[]) {
    const { sessions } = this.o;
    const { adapter, resumeId, taskId } = reservation;
    const now = new Date().toISOString();
    let session: SessionState;
    if (reservation.session) {
      session = await sessions.update(resumeId, (s) => ({ lastRunAt: now, runCount: s.runCount + 1 }));
    } else {
      session = { resumeId, workspaceId: workspace.id, agent: adapter.name, retired: false, createdAt: now, lastRunAt: now, runCount: 1 };
      await sessions.create(session);
    }
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
    return { record, session };
  }

  /** Starts the admitted run's process. From here on, finalisation releases the reservation. */
  private async launch(a: {
    workspace: Workspace;
    request: StartRequest;
    apiUrl: string;
    reservation: Reservation;
    record: StoredRun;
    session: SessionState;
  }): Promise<StartedRun> {
    const { workspace, record, reservation } = a;
    const input = {
      prompt: a.request.prompt,
      workspacePath: workspace.path,
      resumeId: record.resumeId,
      agentSessionId: reservation.session ? a.session.agentSessionId : undefined,
    };
    const parser = reservation.adapter.parser(input);
    let resolve!: (result: RunResult) => void;
    const done = new Promise<RunResult>((r) => {
      resolve = r;
    });
    const live: LiveRun = { record, reservation, parser, resumedFrom: input.agentSessionId, resolve, done };
    this.live.set(record.taskId, live);

    const token = this.o.tokens.issue({ taskId: record.taskId, workspaceId: workspace.id, resumeId: record.resumeId });
    const invocation = reservation.adapter.invocation(input);
    const env = buildRunEnv({
      base: this.o.baseEnv,
      adminToken: this.o.adminToken,
      adapterEnv: invocation.env,
      workspaceEnv: workspace.env,
      cwd: workspace.path,
      run: {
        HEADLESS_API_URL: a.apiUrl,
        HEADLESS_WORKSPACE_ID: workspace.id,
        HEADLESS_TASK_ID: record.taskId,
        HEADLESS_RESUME_ID: record.resumeId,
        HEADLESS_RUN_TOKEN: token,
      },
    });
    let sessionIdNoted = false;
    let parserFailed = false;
    try {
      await preflight(reservation.adapter, invocation.command, env);
      live.process = await superviseProcess({
        spawner: this.o.spawner,
        timeoutMs: record.timeoutMs,
        killGraceMs: KILL_GRACE_MS,
        spawn: {
          command: invocation.command,
          args: invocation.args,
          cwd: workspace.path,
          stdin: invocation.stdin,
          env,
          onStdoutLine: (line) => {
            try {
              for (const event of parser.line(line) ?? []) {
                const { type, data } = fromAgentEvent(event);
                this.o.events.append(record.taskId, type, data);
              }
            } catch (error) {
              // A custom adapter's parser must not take the service down; its verdict says the rest.
              if (!parserFailed) this.o.log(`the ${reservation.adapter.name} adapter could not read a line of ${record.taskId}`, error);
              parserFailed = true;
              return;
            }
            const id = parser.sessionId();
            // Stored as soon as printed, so a Session survives a crash of its run.
            if (!sessionIdNoted && id !== undefined) {
              sessionIdNoted = true;
              void this.o.sessions.noteAgentSessionId(record.resumeId, id);
              this.o.events.append(record.taskId, 'agent.session', { resumeId: record.resumeId });
              const { taskId, resumeId, workspaceId, agent } = record;
              this.o.webhooks
                .enqueue(record, 'agent.session', { taskId, resumeId, workspaceId, agent })
                .catch((error: unknown) => this.o.log(`could not queue the agent.session webhooks of ${taskId}`, error));
            }
          },
        },
      });
    } catch (error) {
      const message = error instanceof SpawnFailure ? error.message : 'the agent process could not be started';
      if (!(error instanceof SpawnFailure)) this.o.log('spawn failed', error);
      const failed = await this.finalize(live, { ...emptyEnd, runtimeError: { code: 'spawn_failed', message } });
      throw new HttpProblem('spawn_failed', message, { extra: { taskId: failed.taskId } });
    }

    const proc = live.process;
    if (live.pendingStop) this.stop(live, live.pendingStop);
    const withProcess: StoredRun = { ...record, process: { pid: proc.pid, startTime: proc.startTime, machine: MACHINE } };
    live.processSaved = this.records.save(withProcess);
    proc.ended
      .then((end) => {
        if (end.lost !== undefined) this.o.log(`lost track of the process of ${record.taskId}`, end.lost);
        return this.finalize(live, processOutcome(end));
      })
      .catch((error: unknown) => this.o.log(`could not finalise ${record.taskId}`, error));
    try {
      await live.processSaved;
    } catch (error) {
      // Without a durable record of its process, crash recovery could not find the run: stop it.
      proc.stop('unrecorded', 0);
      throw error;
    }
    if (live.record.status === 'running') live.record = withProcess;
    return { record: publicRecord(live.record), done };
  }

  /** Judges the outcome, releases the reservation and stores the final record. Runs once per run. */
  private async finalize(live: LiveRun, end: EndInput): Promise<RunRecord> {
    const { record, reservation } = live;
    const verdict = this.verdictOf(live, end.exitCode);
    const outcome = judgeOutcome({
      exitCode: end.exitCode,
      signal: end.signal,
      stopReason: live.process?.stopReason,
      runtimeError: end.runtimeError,
      agentError: verdict.error,
      stderr: end.output.stderr,
      timeoutMs: record.timeoutMs,
    });
    const endedAt = new Date();
    const final: StoredRun = {
      ...record,
      status: outcome.status,
      endedAt: endedAt.toISOString(),
      durationMs: Math.max(0, endedAt.getTime() - Date.parse(record.createdAt)),
      exitCode: end.exitCode,
      signal: end.signal,
      ...(outcome.error ? { error: outcome.error } : {}),
      ...(verdict.usage ? { usage: verdict.usage } : {}),
      ...(verdict.lastMessage ? { lastMessage: clip(verdict.lastMessage, LAST_MESSAGE_MAX) } : {}),
    };
    // The Session is settled first, so whoever sees the run ended sees its Session as it is now.
    if (outcome.status === 'failed' && verdict.answered === false) {
      // The agent failed before its model ever answered: its session may not exist, so the
      // Session keeps the agent session id it had before this run (none for a new Session).
      await this.o.sessions.setAgentSessionId(record.resumeId, live.resumedFrom);
    } else await this.o.sessions.noteAgentSessionId(record.resumeId, verdict.agentSessionId);
    live.record = final;
    // The timeline ends (in memory, at once) as the record does, so no reader sees one without the other.
    const timelineStored = this.o.events.end(publicRecord(final));
    this.o.tokens.revoke(record.taskId);
    await reservation.release();

    await live.processSaved?.catch(() => undefined);
    // Queued before the final record is stored: were the service to die in between, recovery
    // would find the run `running` and queue them (again, which is a no-op) itself.
    await this.o.webhooks
      .enqueue(final, 'run.ended', publicRecord(final))
      .catch((error: unknown) => this.o.log(`could not queue the webhooks of ${record.taskId}`, error));
    await this.records.finish(final);
    await this.records.saveOutput(record.taskId, end.output);
    await timelineStored;
    this.live.delete(record.taskId);
    live.resolve({ record: publicRecord(final), output: end.output });
    return publicRecord(final);
  }

  /** The parser's verdict; a parser that throws (a custom adapter's) makes the run failed, never stuck. */
  private verdictOf(live: LiveRun, exitCode: number | null): AgentVerdict {
    try {
      return live.parser.finish(exitCode);
    } catch (error) {
      this.o.log(`the ${live.reservation.adapter.name} adapter could not judge ${live.record.taskId}`, error);
      return { error: 'the agent adapter could not read the output' };
    }
  }

  private async find(taskId: string): Promise<StoredRun | undefined> {
    return this.live.get(taskId)?.record ?? (await this.records.find(taskId));
  }

  async get(taskId: string): Promise<RunRecord> {
    const stored = await this.find(taskId);
    if (!stored) throw new HttpProblem('run_not_found', `No run "${taskId}".`);
    if (!stored.webhookTargets) return publicRecord(stored);
    return { ...publicRecord(stored), webhooks: await this.o.webhooks.view(stored) };
  }

  /** The last `bytes` bytes of each stream of a run, running or ended. */
  async output(taskId: string, bytes: number): Promise<RunOutputView> {
    const live = this.live.get(taskId);
    const record = await this.get(taskId);
    const output = live ? live.process?.output() : await this.records.output(taskId);
    return { taskId, status: record.status, ...tailOf(output, bytes), retained: output !== undefined };
  }

  async list(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    const page = await this.records.page(workspaceId, status, limit, cursor);
    const runs = await Promise.all(page.ids.map((id) => this.find(id)));
    return { runs: runs.filter((r): r is StoredRun => r !== undefined).map(publicRecord), nextCursor: page.next };
  }

  /** Cancels a run of this instance, or asks the instance that runs it. */
  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.live.get(taskId);
    if (!live) {
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
    const stopReason = live.process?.stopReason ?? live.pendingStop;
    if (live.record.status !== 'running' || (stopReason !== undefined && stopReason !== 'cancel')) {
      throw new HttpProblem('run_not_running', `Run "${taskId}" is already stopping.`);
    }
    this.stop(live, 'cancel');
    return publicRecord(live.record);
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
      Promise.all(runs.map((r) => r.done)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    await this.o.events.close();
    await this.records.close();
  }
}

interface EndInput {
  exitCode: number | null;
  signal: string | null;
  output: ProcessOutput;
  runtimeError?: RunError;
}

const emptyEnd: EndInput = { exitCode: null, signal: null, output: emptyOutput };

function processOutcome(end: ProcessEnd): EndInput {
  return {
    exitCode: end.exitCode,
    signal: end.signal,
    output: { stdout: end.stdout, stderr: end.stderr, truncated: end.truncated },
    ...(end.lost === undefined ? {} : { runtimeError: { code: 'process_lost', message: 'The service lost track of the agent process.' } }),
  };
}
