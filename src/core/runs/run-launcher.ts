import { HttpProblem } from '../../contract/problems';
import type { Log } from '../logger';
import type { ServiceObserver } from '../telemetry/observer';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import { MACHINE } from '../process/machine';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { publicRecord } from '../public-record';
import type { Sandbox } from '../sandbox/sandbox';
import type { RunTracing } from '../telemetry/run-tracing';
import type { SessionBook } from '../sessions';
import type { StoredRun, Workspace } from '../types';
import type { Reservation } from './admission';
import { emptyEnd, processOutcome } from './ending';
import { runVariables } from './env';
import { InboxCommand } from './inbox-command';
import { KILL_GRACE_MS, launchProcess } from './launch';
import { type LiveRun, type ServiceStop, type StartedRun, newLiveRun } from './live-run';
import { outputPipe } from './output-pipe';
import { inWorkspace } from './placement';
import type { RunRecords } from './records';
import { RunEnding } from './run-ending';
import type { RunTokens } from './tokens';

/** Shutdown must finish within the daemon's 10 s, so its grace is shorter. */
const SHUTDOWN_GRACE_MS = 2000;

export interface RunLauncherDeps {
  sessions: SessionBook;
  tokens: RunTokens;
  spawner: Spawner;
  events: RunEvents;
  webhooks: Webhooks;
  records: RunRecords;
  adminToken?: string;
  baseEnv: NodeJS.ProcessEnv;
  log: Log;
  observe: ServiceObserver;
  sandbox: Sandbox;
  tracing?: RunTracing;
}

/** What a run's agent is started with. */
export interface LaunchInput {
  workspace: Workspace;
  prompt: string;
  apiUrl: string;
  reservation: Reservation;
  /** Its durable `running` record. */
  record: StoredRun;
  /** The caller's W3C `traceparent`, if it gave one. */
  traceparent?: string;
}

/**
 * The runs whose agents run on this instance: each started once its `running` record is durable,
 * supervised, and ended through RunEnding, which releases its reservation and stores its final
 * record before anything is announced.
 */
export class RunLauncher {
  private readonly live = new Map<string, LiveRun>();
  private readonly placement;
  private readonly ending: RunEnding;
  private readonly inboxCommand = new InboxCommand();

  constructor(private readonly o: RunLauncherDeps) {
    this.placement = inWorkspace(o.spawner);
    this.ending = new RunEnding({ ...o, forget: (taskId) => this.live.delete(taskId) });
  }

  get(taskId: string): LiveRun | undefined {
    return this.live.get(taskId);
  }

  all(): LiveRun[] {
    return [...this.live.values()];
  }

  /** Starts the admitted run's process. From here on, finalisation releases the reservation. */
  async launch({ workspace, prompt, apiUrl, reservation, record, traceparent }: LaunchInput): Promise<StartedRun> {
    const { taskId, resumeId } = record;
    const input = { prompt, resumeId, agentSessionId: reservation.session?.agentSessionId, permissions: record.policy?.permissions ?? 'full' } as const;
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
        policy: record.policy,
        sandbox: this.o.sandbox,
        timeoutMs: record.timeoutMs,
        baseEnv: this.o.baseEnv,
        adminToken: this.o.adminToken,
        binDir: this.inboxCommand.folder(),
        run: runVariables({ apiUrl, workspaceId: workspace.id, taskId, resumeId, token, traceparent: this.o.tracing?.begin(record, traceparent) }),
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
    return this.supervise(live, record);
  }

  /** Records where its process runs, and ends the run when the process ends. */
  private async supervise(live: LiveRun, record: StoredRun): Promise<StartedRun> {
    const { taskId } = live;
    const proc = live.process!;
    if (live.pendingStop) this.stop(live, live.pendingStop);
    const where = { pid: proc.pid, startTime: proc.startTime, machine: MACHINE };
    live.processSaved = this.o.records.update(taskId, (r) => (r.status === 'running' ? { ...r, process: where } : undefined));
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
    this.o.observe.runStarted(this.o.records.current(taskId) ?? record);
    return { record: publicRecord(this.o.records.current(taskId) ?? record), done: live.done };
  }

  stop(live: LiveRun, reason: ServiceStop): void {
    if (live.process) live.process.stop(reason, reason === 'shutdown' ? SHUTDOWN_GRACE_MS : KILL_GRACE_MS);
    else live.pendingStop ??= reason;
  }

  /** Removes the folder of the `headless-inbox` launcher. */
  close(): void {
    this.inboxCommand.close();
  }
}
