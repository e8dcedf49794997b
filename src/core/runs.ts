import type { AgentRegistry } from './agents/registry';
import type { AgentAdapter, AgentOutputParser } from './agents/types';
import { buildRunEnv } from './env';
import { newSortableId } from './ids';
import { OrderedIndex } from './ordered-index';
import { HttpProblem, StorageError } from './problem';
import { reapEarlierRun } from './process-tree';
import type { RunTokens } from './run-tokens';
import type { StartRequest } from './schemas';
import { type SessionBook, isSafeAgentSessionId } from './sessions';
import { SpawnFailure, type SpawnedProcess, type Spawner } from './spawner';
import type { HeadlessStore } from './store';
import type { RunError, RunRecord, RunStatus, SessionState, StoredRun, Workspace } from './types';

const runKey = (taskId: string) => `run:${taskId}`;
const metaKey = (workspaceId: string) => `workspace:${workspaceId}`;

/** Grace between SIGTERM and SIGKILL for the watchdog and cancel. */
const KILL_GRACE_MS = 5000;
/** Shutdown must finish within the daemon's 10 s, so its grace is shorter. */
const SHUTDOWN_GRACE_MS = 2000;
const SHUTDOWN_WAIT_MS = 6000;
const CACHE_SIZE = 2000;

type StopReason = 'cancel' | 'timeout' | 'shutdown';

export interface RunOutput {
  stdout: string;
  stderr: string;
  truncated: boolean;
}

interface LiveRun {
  record: StoredRun;
  process?: SpawnedProcess;
  stopReason?: StopReason;
  timers: NodeJS.Timeout[];
  done: Promise<RunResult>;
  resolve: (result: RunResult) => void;
}

export interface RunResult {
  record: RunRecord;
  output: RunOutput;
}

export interface RunServiceOptions {
  store: HeadlessStore;
  registry: AgentRegistry;
  sessions: SessionBook;
  tokens: RunTokens;
  spawner: Spawner;
  maxConcurrentRuns: number;
  defaultAgent?: string;
  adminToken?: string;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  log: (message: string, error?: unknown) => void;
}

/** The public record: the stored one without what only crash recovery needs. */
export function publicRecord(stored: StoredRun): RunRecord {
  const { process: _process, bootId: _bootId, ...record } = stored;
  return record;
}

const retryDelays = [50, 200, 1000, 3000];

/**
 * The run lifecycle: admission (agent, Session, capacity), the durable record, the process,
 * the watchdog, cancel, finalisation, crash recovery and shutdown.
 */
export class RunService {
  private readonly index = new OrderedIndex<RunStatus>();
  private readonly live = new Map<string, LiveRun>();
  private readonly cache = new Map<string, StoredRun>();
  private readonly lastAgent = new Map<string, string>();
  private readonly bootId = newSortableId('boot_');
  private active = 0;
  private shuttingDown = false;

  constructor(private readonly o: RunServiceOptions) {}

  /** Indexes every stored run and turns the `running` ones of earlier boots into `interrupted`. */
  async load(): Promise<void> {
    const orphans: StoredRun[] = [];
    for await (const [, run] of this.o.store.scan<StoredRun>('run:')) {
      this.index.add(run.workspaceId, run.taskId, run.status);
      if (run.status === 'running') orphans.push(run);
    }
    for await (const [, meta] of this.o.store.scan<{ workspaceId: string; lastAgent: string }>('workspace:')) {
      this.lastAgent.set(meta.workspaceId, meta.lastAgent);
    }
    const now = new Date();
    for (const run of orphans) {
      reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
      const interrupted: StoredRun = {
        ...run,
        status: 'interrupted',
        endedAt: now.toISOString(),
        durationMs: Math.max(0, now.getTime() - Date.parse(run.createdAt)),
        error: { code: 'interrupted', message: 'The service stopped while the run was running; it was not re-run.' },
      };
      await this.o.store.set(runKey(run.taskId), interrupted);
      this.index.move(run.workspaceId, run.taskId, 'running', 'interrupted');
    }
  }

  /**
   * Admits and starts a run. After the Session is read, everything up to the reservations is
   * synchronous: no await between the busy and capacity checks and taking the slots.
   */
  async start(
    workspace: Workspace,
    request: StartRequest,
    apiUrl: string,
  ): Promise<{ record: RunRecord; done: Promise<RunResult> }> {
    if (this.shuttingDown) throw new HttpProblem('shutting_down', 'The service is shutting down.');
    const { registry, sessions } = this.o;

    let adapter: AgentAdapter | undefined = request.agent === undefined ? undefined : registry.check(workspace, request.agent);
    const session = request.resumeId === undefined ? undefined : await sessions.require(request.resumeId);
    if (this.shuttingDown) throw new HttpProblem('shutting_down', 'The service is shutting down.');
    if (session) {
      if (session.workspaceId !== workspace.id) {
        throw new HttpProblem('session_other_workspace', `Session "${session.resumeId}" belongs to another workspace.`);
      }
      if (session.retired) throw new HttpProblem('session_retired', `Session "${session.resumeId}" is retired.`);
      if (adapter && adapter.name !== session.agent) {
        throw new HttpProblem('session_not_resumable', `Session "${session.resumeId}" belongs to agent "${session.agent}".`);
      }
      adapter ??= registry.check(workspace, session.agent);
      // Busy first: the agent's session id of a run in flight is only known once it has printed it.
      if (sessions.isBusy(session.resumeId)) throw new HttpProblem('session_busy', `Session "${session.resumeId}" has a run in progress.`);
      if (!sessions.isResumable(session)) {
        throw new HttpProblem('session_not_resumable', `Session "${session.resumeId}" cannot be resumed.`);
      }
    }
    adapter ??= registry.select({
      workspace,
      lastAgent: this.lastAgent.get(workspace.id),
      defaultAgent: this.o.defaultAgent,
      path: workspace.env?.PATH ?? this.o.baseEnv.PATH,
    });
    if (this.active >= this.o.maxConcurrentRuns) {
      throw new HttpProblem('capacity_reached', `All ${this.o.maxConcurrentRuns} run slots are busy; retry later.`, {
        headers: { 'retry-after': '5' },
      });
    }

    const now = new Date();
    const taskId = newSortableId('run_');
    const resumeId = session?.resumeId ?? newSortableId('ses_');
    this.active += 1;
    sessions.take(resumeId, taskId);

    let admitted = false;
    try {
      const sessionState: SessionState = session
        ? await sessions.update(resumeId, (s) => ({ lastRunAt: now.toISOString(), runCount: s.runCount + 1 }))
        : {
            resumeId,
            workspaceId: workspace.id,
            agent: adapter.name,
            retired: false,
            createdAt: now.toISOString(),
            lastRunAt: now.toISOString(),
            runCount: 1,
          };
      if (!session) await sessions.create(sessionState);
      const record: StoredRun = {
        taskId,
        resumeId,
        workspaceId: workspace.id,
        agent: adapter.name,
        mode: request.wait ? 'sync' : 'async',
        status: 'running',
        createdAt: now.toISOString(),
        endedAt: null,
        durationMs: null,
        timeoutMs: request.timeoutMs,
        exitCode: null,
        signal: null,
        bootId: this.bootId,
      };
      await this.o.store.set(runKey(taskId), record);
      this.index.add(workspace.id, taskId, 'running');
      admitted = true;
      void this.rememberAgent(workspace.id, adapter.name);
      return await this.launch(workspace, adapter, record, request, apiUrl, sessionState);
    } finally {
      if (!admitted) {
        this.active -= 1;
        sessions.release(resumeId, taskId);
      }
    }
  }

  /**
   * Records the agent's own session id on the Session (once it is known and safe to put back on
   * a command line). Returns whether there was one to record.
   */
  private saveAgentSessionId(resumeId: string, captured: string | undefined): boolean {
    if (captured === undefined || !isSafeAgentSessionId(captured)) return false;
    this.o.sessions
      .update(resumeId, (s) => (s.agentSessionId === captured ? {} : { agentSessionId: captured }))
      .catch((e: unknown) => this.o.log('could not store the agent session id', e));
    return true;
  }

  /** Updates the workspace's most recent headless agent; a failed write is logged, never thrown. */
  private async rememberAgent(workspaceId: string, agent: string): Promise<void> {
    if (this.lastAgent.get(workspaceId) === agent) return;
    this.lastAgent.set(workspaceId, agent);
    await this.o.store.set(metaKey(workspaceId), { workspaceId, lastAgent: agent }).catch((error: unknown) => {
      this.o.log('could not record the most recent headless agent', error);
    });
  }

  /** Spawns the process of an admitted run. From here on, finalisation releases the slot. */
  private async launch(
    workspace: Workspace,
    adapter: AgentAdapter,
    record: StoredRun,
    request: StartRequest,
    apiUrl: string,
    session: SessionState,
  ): Promise<{ record: RunRecord; done: Promise<RunResult> }> {
    const input = {
      prompt: request.prompt,
      workspacePath: workspace.path,
      resumeId: record.resumeId,
      agentSessionId: request.resumeId === undefined ? undefined : session.agentSessionId,
    };
    const parser: AgentOutputParser = adapter.parser(input);
    let resolve!: (result: RunResult) => void;
    const done = new Promise<RunResult>((r) => {
      resolve = r;
    });
    const live: LiveRun = { record, timers: [], done, resolve };
    this.live.set(record.taskId, live);

    const token = this.o.tokens.issue({ taskId: record.taskId, workspaceId: workspace.id, resumeId: record.resumeId });
    let sessionIdSaved = false;
    let child: SpawnedProcess;
    try {
      const invocation = adapter.invocation(input);
      child = await this.o.spawner({
        command: invocation.command,
        args: invocation.args,
        cwd: workspace.path,
        stdin: invocation.stdin,
        env: buildRunEnv({
          base: this.o.baseEnv,
          adminToken: this.o.adminToken,
          adapterEnv: invocation.env,
          workspaceEnv: workspace.env,
          run: {
            HEADLESS_API_URL: apiUrl,
            HEADLESS_WORKSPACE_ID: workspace.id,
            HEADLESS_TASK_ID: record.taskId,
            HEADLESS_RESUME_ID: record.resumeId,
            HEADLESS_RUN_TOKEN: token,
          },
        }),
        onStdoutLine: (line) => {
          parser.line(line);
          if (!sessionIdSaved) sessionIdSaved = this.saveAgentSessionId(record.resumeId, parser.sessionId());
        },
      });
    } catch (error) {
      const message = error instanceof SpawnFailure ? error.message : 'the agent process could not be started';
      if (!(error instanceof SpawnFailure)) this.o.log('spawn failed', error);
      const failed = await this.finalize(live, { code: 'spawn_failed', message }, null, null, parser, emptyOutput);
      throw new HttpProblem('spawn_failed', message, { extra: { taskId: failed.taskId } });
    }

    live.process = child;
    live.timers.push(setTimeout(() => this.stop(live, 'timeout', KILL_GRACE_MS), record.timeoutMs));
    child.exit
      .then((exit) =>
        this.finalize(live, undefined, exit.exitCode, exit.signal, parser, {
          stdout: exit.stdout,
          stderr: exit.stderr,
          truncated: exit.truncated,
        }),
      )
      .catch((error: unknown) => this.o.log(`could not finalise ${record.taskId}`, error));

    const withProcess: StoredRun = { ...live.record, process: { pid: child.pid, startTime: child.startTime } };
    try {
      await this.o.store.set(runKey(record.taskId), withProcess);
    } catch (error) {
      // Without a durable record of the process, the run is not acknowledged: stop it.
      this.stop(live, 'shutdown', 0);
      throw error;
    }
    if (live.record.status === 'running') live.record = withProcess;
    return { record: publicRecord(live.record), done: live.done };
  }

  /** Signals the run's process group; the first stop to act decides the final status. */
  private stop(live: LiveRun, reason: StopReason, graceMs: number): void {
    if (live.stopReason !== undefined || live.record.status !== 'running') return;
    live.stopReason = reason;
    live.process?.kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
    if (graceMs > 0) live.timers.push(setTimeout(() => live.process?.kill('SIGKILL'), graceMs));
  }

  private async finalize(
    live: LiveRun,
    runtimeError: RunError | undefined,
    exitCode: number | null,
    signal: string | null,
    parser: AgentOutputParser,
    output: RunOutput,
  ): Promise<RunRecord> {
    for (const timer of live.timers) clearTimeout(timer);
    const { record } = live;
    const verdict = parser.finish(exitCode);
    let status: RunStatus;
    let error: RunError | undefined = runtimeError;
    if (live.stopReason === 'cancel') status = 'cancelled';
    else if (live.stopReason === 'timeout') {
      status = 'timed_out';
      error = { code: 'timed_out', message: `Stopped by the watchdog after ${record.timeoutMs} ms.` };
    } else if (live.stopReason === 'shutdown') {
      status = 'interrupted';
      error = { code: 'interrupted', message: 'The service stopped while the run was running; it was not re-run.' };
    } else if (runtimeError) status = 'failed';
    else if (exitCode === 0 && !verdict.error) status = 'succeeded';
    else {
      status = 'failed';
      error =
        exitCode !== 0
          ? exitCode === null
            ? { code: 'signal', message: `The agent was killed by ${signal ?? 'a signal'}.` }
            : { code: 'exit_code', message: `The agent exited with code ${exitCode}.` }
          : { code: 'agent_error', message: verdict.error ?? 'The agent reported a failure.' };
    }
    const endedAt = new Date();
    const final: StoredRun = {
      ...record,
      status,
      endedAt: endedAt.toISOString(),
      durationMs: Math.max(0, endedAt.getTime() - Date.parse(record.createdAt)),
      exitCode,
      signal,
      ...(error ? { error } : {}),
    };
    live.record = final;

    this.o.tokens.revoke(record.taskId);
    this.active -= 1;
    this.saveAgentSessionId(record.resumeId, verdict.agentSessionId);
    this.o.sessions.release(record.resumeId, record.taskId);

    await this.persistFinal(final);
    this.index.move(record.workspaceId, record.taskId, 'running', status);
    this.live.delete(record.taskId);
    this.remember(final);
    live.resolve({ record: publicRecord(final), output });
    return publicRecord(final);
  }

  /** A final status is written once; a refusing store is retried, the record kept in memory meanwhile. */
  private async persistFinal(final: StoredRun): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.o.store.set(runKey(final.taskId), final);
        return;
      } catch (error) {
        if (!(error instanceof StorageError) || attempt >= retryDelays.length) {
          this.o.log(`could not store the final record of ${final.taskId}`, error);
          return;
        }
        await new Promise((r) => setTimeout(r, retryDelays[attempt]));
      }
    }
  }

  private remember(record: StoredRun): void {
    this.cache.delete(record.taskId);
    this.cache.set(record.taskId, record);
    if (this.cache.size > CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
  }

  /** The live record of a running run, else the cached or stored one. */
  private async findRun(taskId: string): Promise<StoredRun | undefined> {
    const live = this.live.get(taskId);
    if (live) return live.record;
    const cached = this.cache.get(taskId);
    if (cached) return cached;
    const stored = await this.o.store.get<StoredRun>(runKey(taskId));
    if (stored && stored.status !== 'running') this.remember(stored);
    return stored;
  }

  async get(taskId: string): Promise<RunRecord> {
    const stored = await this.findRun(taskId);
    if (!stored) throw new HttpProblem('run_not_found', `No run "${taskId}".`);
    return publicRecord(stored);
  }

  async list(workspaceId: string, status: RunStatus | undefined, limit: number, cursor?: string): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    const page = this.index.page(workspaceId, status, limit, cursor);
    const runs = await Promise.all(page.ids.map((id) => this.findRun(id)));
    return { runs: runs.filter((r): r is StoredRun => r !== undefined).map(publicRecord), nextCursor: page.next };
  }

  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.live.get(taskId);
    if (!live) {
      await this.get(taskId);
      throw new HttpProblem('run_not_running', `Run "${taskId}" has already ended.`);
    }
    if (live.record.status !== 'running' || (live.stopReason !== undefined && live.stopReason !== 'cancel')) {
      throw new HttpProblem('run_not_running', `Run "${taskId}" is already stopping.`);
    }
    this.stop(live, 'cancel', KILL_GRACE_MS);
    return publicRecord(live.record);
  }

  /** Refuses new starts, stops every running run (recorded `interrupted`) and waits, bounded. */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    const runs = [...this.live.values()];
    for (const live of runs) this.stop(live, 'shutdown', SHUTDOWN_GRACE_MS);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(runs.map((r) => r.done)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }
}

const emptyOutput: RunOutput = { stdout: '', stderr: '', truncated: false };
