/**
 * @module The runs whose agents run on this instance: each started once its `running` record is
 * durable (placed, its environment built, its agent checked, confined where its policy says,
 * supervised by its guards) and ended through RunEnding, which releases its reservation and
 * stores its final record before anything is announced.
 */
import { outputSchemaOf } from './new-record';
import { Refusal } from '../../contract/problems';
import { policyRefusal, preflight } from '../agents/preflight';
import { protocolOf } from '../agents/protocols/lines';
import type { TokenPrice } from '../agents/prices';
import type { AgentEvent, AgentRunInput } from '../agents/types';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import { publishAsked } from '../worktrees/publish-settings';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { publicRecord } from '../public-record';
import type { Sandbox } from '../sandbox/sandbox';
import type { SessionBook } from '../sessions';
import type { ServiceObserver } from '../telemetry/observer';
import type { RunTracing } from '../telemetry/run-tracing';
import type { StoredRun, Workspace } from '../types';
import type { Reservation } from './admission';
import { RunEnding, emptyEnd, processOutcome } from './ending';
import { type HeldSecrets, buildRunEnv, runVariables } from './env';
import { turnHands } from './turn-hands';
import { type Guard, budgetGuard, memoryGuard, stallGuard, watchdog } from './guards';
import { agentIO } from './agent-io';
import { InboxCommand } from './inbox-command';
import type { RunLifecycle } from './lifecycle';
import { type LiveRun, type ServiceStop, type StartedRun, newLiveRun } from './live-run';
import { STOPS } from './outcome';
import { outputPipe } from './output-pipe';
import { runPlacedSetup } from './placed-setup';
import type { PlacedSetup } from './placement';
import { type PlacedRun, type Placements, placementRecord } from './placements';
import type { RunRecords } from './records';
import { answerOf, laterTurn } from './repair-turn';
import { resultInstructions } from './structured-output';
import { type ProcessEnd, type SupervisedProcess, superviseProcess } from './supervisor';
import type { RunTokens } from './tokens';
import { type RunSecrets, redactValue } from './run-secrets';
import { RunQuestions } from './questions';
import type { Approvals } from '../approvals/approvals';
import type { RunGrader } from './grader';
import { type TurnPolicy, decideTurn, timeLeft } from './turn-policy';

/** Grace between SIGTERM and SIGKILL for the guards and cancel. */
export const KILL_GRACE_MS = 5000;
/** Shutdown must finish within the daemon's 10 s, so its grace is shorter. */
const SHUTDOWN_GRACE_MS = 2000;

export interface LauncherResources {
  lifecycle: RunLifecycle;
  sessions: SessionBook;
  tokens: RunTokens;
  /** The values its start gave it and the operator's it names: given to its agent, taken out of what it prints. */
  runSecrets: RunSecrets;
  events: RunEvents;
  records: RunRecords;
  placement: Placements;
  /** The handler's spawner, given to the placement providers. */
  spawner: Spawner;
  /** What no run's environment may hold. */
  secrets: HeldSecrets;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  log: Log;
  observe: ServiceObserver;
  sandbox: Sandbox;
  /** The installation's guards, over which a workspace may set its own. */
  guards: { stallTimeoutMs?: number; maxMemoryMb?: number };
  /** Token prices by agent, for the agents that report no cost (agents/prices.ts). */
  prices: Record<string, TokenPrice>;
  tracing?: RunTracing;
  instanceId: string;
  approvals: Approvals;
  /** What follows a turn's end, asked in order (runs/turn-policies.ts). */
  turnPolicies: readonly TurnPolicy[];
  /** Starts a verify loop's grader (runs/grader.ts). */
  grader: RunGrader;
}

/** A turn after the first, on a new process: its prompt, on the agent session the turns before printed. */
interface LaterTurn {
  prompt: string;
  agentSessionId: string;
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

export class RunLauncher {
  private readonly live = new Map<string, LiveRun>();
  private readonly ending: RunEnding;
  private readonly inboxCommand = new InboxCommand();

  constructor(private readonly $: LauncherResources) {
    this.ending = new RunEnding($);
  }

  get(taskId: string): LiveRun | undefined {
    return this.live.get(taskId);
  }

  all(): LiveRun[] {
    return [...this.live.values()];
  }

  /** Starts the admitted run's process. From here on, finalisation releases the reservation. */
  async launch(input: LaunchInput): Promise<StartedRun> {
    const { record, reservation, workspace } = input;
    const { taskId } = record;
    const agentSessionId = reservation.session?.agentSessionId;
    const live = newLiveRun({ taskId, reservation, resumedFrom: agentSessionId, done: this.$.lifecycle.waitFor(taskId) });
    const settings = workspace.publishTo;
    if (settings && publishAsked(record.spec?.publish).push) live.publishing = { workspacePath: workspace.path, settings, apiUrl: input.apiUrl };
    this.live.set(taskId, live);
    void live.done.then(
      () => this.live.delete(taskId),
      () => this.live.delete(taskId),
    );
    let placed: PlacedRun;
    try {
      placed = await this.$.placement.prepare({ taskId, resumeId: record.resumeId, workspace, policy: record.policy, spawner: this.$.spawner });
      live.placed = placed;
      live.process = await this.start(input, live, placed);
    } catch (error) {
      const failure = error instanceof SpawnFailure ? error : undefined;
      const message = failure?.message ?? 'the agent process could not be started';
      if (!failure) this.$.log('spawn failed', error);
      await this.ending.finalize(live, { ...emptyEnd, runtimeError: { code: failure?.code ?? 'spawn_failed', message } });
      this.inboxCommand.dropSchema(taskId);
      throw new Refusal('spawn_failed', message, { extra: { taskId } });
    }
    return this.supervise(live, input, placed);
  }

  /**
   * What its agent is given: the prompt (or a later turn's, on the session the turns before
   * printed), and its schema where the CLI takes one natively; otherwise the prompt says how to answer.
   */
  private agentInput({ prompt, record, reservation }: LaunchInput, turn: LaterTurn | undefined, cwd: string): AgentRunInput {
    const { resumeId } = record;
    const schema = outputSchemaOf(record);
    const native = reservation.adapter.structuredOutput === 'native';
    const asked = turn?.prompt ?? prompt;
    return {
      prompt: schema === undefined || native || turn ? asked : `${asked}\n${resultInstructions(schema)}`,
      resumeId,
      agentSessionId: turn?.agentSessionId ?? reservation.session?.agentSessionId,
      permissions: record.policy?.permissions ?? 'full',
      sandboxed: record.policy?.sandbox === true,
      workspacePath: cwd,
      ...(record.budget ? { budget: record.budget } : {}),
      ...(schema && native ? { outputSchema: { schema, file: this.inboxCommand.schemaFile(record.taskId, schema) } } : {}),
    };
  }

  /** Builds the run's environment, checks the agent can start, and starts it, confined where its policy says, under its guards. */
  private async start(input: LaunchInput, live: LiveRun, placed: PlacedRun, turn?: LaterTurn): Promise<SupervisedProcess> {
    const { workspace, record, reservation } = input;
    const { adapter } = reservation;
    const { cwd } = placed;
    const refusal = policyRefusal(adapter, record.policy);
    if (refusal) throw new SpawnFailure(refusal);
    const agentInput = this.agentInput(input, turn, cwd);
    const invocation = adapter.invocation(agentInput);
    const protocol = protocolOf(adapter, agentInput.permissions);
    const { taskId, resumeId } = record;
    const token = this.$.tokens.issue({ taskId, workspaceId: workspace.id, resumeId });
    const traceparent = turn ? undefined : this.$.tracing?.begin(publicRecord(record), input.traceparent);
    const run = runVariables({ apiUrl: input.apiUrl, workspaceId: workspace.id, taskId, resumeId, token, traceparent });
    const given = this.$.runSecrets.envOf(taskId, record.secrets);
    if ('lost' in given) {
      const names = given.lost.join(', ');
      throw new SpawnFailure(
        `The values of its secrets (${names}) are gone: they are held in memory only, by the instance that accepted it, which has restarted since.`,
        'secrets_unavailable',
      );
    }
    // A secret adds a variable; it never replaces one its agent or its operator sets (opencode's permissions, goose's mode, a proxy).
    const clash = Object.keys(given.env).find((name) => [invocation.env, workspace.env, placed.env].some((set) => set !== undefined && name in set));
    if (clash !== undefined) {
      throw new SpawnFailure(
        `Its secret ${clash} would replace a variable its agent (${adapter.name}) or its workspace sets: give it another name.`,
        'secret_refused',
      );
    }
    // A grader reads what the run it grades wrote: that run's values are taken out of what it says too.
    live.redact ??= this.$.runSecrets.redactor(taskId, record.secrets) ?? this.$.runSecrets.redactorOf(record.metadata?.['verify.grades']);
    const env = buildRunEnv({
      base: this.$.baseEnv,
      secrets: this.$.secrets,
      adapterEnv: invocation.env,
      workspaceEnv: { ...workspace.env, ...placed.env },
      given: given.env,
      cwd,
      binDir: this.inboxCommand.folder(),
      run,
    });
    await preflight(adapter, invocation.command, env);
    const spawner = this.spawnerOf(input, placed, env);
    live.confined ??= { spawner, env };
    if (!turn && placed.setup) await this.setUp(live, placed, placed.setup, spawner, env);
    const watchers: Array<(event: AgentEvent) => void> = [];
    live.questions ??= new RunQuestions({ ...this.$, noteApprovals: (...a) => this.$.lifecycle.noteApprovals(...a) }, { record, cwd });
    const questions = live.questions;
    const io = agentIO({
      live,
      watchers,
      price: this.$.prices[adapter.name],
      questions,
      events: this.$.events,
      next: () => this.nextTurn(live, input, true, 0),
    });
    const conversation = protocol.open(io, agentInput);
    live.conversation = conversation;
    const onSessionId = (id: string) => this.ending.noteSession(live, id);
    const onStdoutLine = outputPipe({ taskId, adapterName: adapter.name, conversation, log: this.$.log, onSessionId, redact: live.redact });
    // The run's own guard settings (its spec: its workspace's, schedule's or start's) win over the installation's.
    const guards = guardsOf(record, {
      // A later turn has what is left of the run's time, and of its budget.
      timeoutMs: turn ? Math.max(1, timeLeft(record)) : record.timeoutMs,
      toolCalls: live.toolCalls,
      stallTimeoutMs: record.spec?.stallTimeoutMs ?? this.$.guards.stallTimeoutMs,
      maxMemoryMb: record.spec?.maxMemoryMb ?? this.$.guards.maxMemoryMb,
    });
    const proc = await superviseProcess({
      spawner,
      host: placed.host,
      run: { taskId, data: placed.data },
      guards,
      onEvent: (listener) => void watchers.push(listener),
      onWaiting: (listener) => questions.onWaiting(listener),
      killGraceMs: KILL_GRACE_MS,
      spawn: { command: invocation.command, args: invocation.args, cwd, stdin: invocation.stdin, keepStdin: protocol.talksBack, env, onStdoutLine },
    });
    io.attach(proc);
    return proc;
  }

  /**
   * Its placement's setup, through its agent's spawner (so confined alike): what the setup runs
   * comes from the repository, which an agent may have written. A failed one undid its placement.
   */
  private async setUp(live: LiveRun, placed: PlacedRun, setup: PlacedSetup, spawner: Spawner, env: Record<string, string>): Promise<void> {
    const started = (proc: SupervisedProcess) => {
      live.beside = proc;
      if (live.pendingStop) proc.stop(STOPS[live.pendingStop], 0);
    };
    try {
      // Recorded with its process, after: what the setup left is the placement's, not the run's work.
      placed.data = await runPlacedSetup({ setup, spawner, host: placed.host, run: { taskId: live.taskId, data: placed.data }, env, started });
    } catch (error) {
      live.placed = undefined;
      if (live.pendingStop) live.endedBy = STOPS[live.pendingStop];
      throw error;
    } finally {
      live.beside = undefined;
    }
  }

  /** The spawner of its agent: confined in a sandbox where its policy says. */
  private spawnerOf({ workspace, record, reservation }: LaunchInput, placed: PlacedRun, env: Record<string, string>): Spawner {
    if (!record.policy?.sandbox) return placed.spawner;
    const { adapter } = reservation;
    return this.$.sandbox.confine(placed.spawner, {
      workspaceId: workspace.id,
      workspace: placed.view?.root ?? workspace.path,
      readable: placed.view?.readable ?? [],
      hidden: placed.view?.hidden ?? [],
      replaced: placed.view?.replaced ?? [],
      cwd: placed.cwd,
      readOnly: record.policy.permissions === 'read-only',
      state: adapter.stateDirs ?? [],
      config: [...(adapter.config ?? []), ...(adapter.credentials?.files ?? [])],
      env,
      network: workspace.network ?? [],
      madeForRun: placed.madeForRun ?? false,
    });
  }

  /** Records where its process runs (and where it was placed), and ends the run when the process ends. */
  private async supervise(live: LiveRun, input: LaunchInput, placed: PlacedRun): Promise<StartedRun> {
    const { taskId } = live;
    const { record } = input;
    const proc = live.process;
    if (!proc) throw new Error(`${taskId} has no process to supervise`);
    try {
      await this.watch(live, input, placed, proc);
    } catch (error) {
      // Without a durable record of its process, crash recovery could not find the run: stop it.
      proc.stop(STOPS.unrecorded, 0);
      throw error;
    }
    const current = publicRecord(this.$.records.current(taskId) ?? record);
    this.$.observe.emit('runStarted', current);
    return { record: current, done: live.done };
  }

  /** Records the process (crash recovery finds it by it), and what follows when it ends: another turn, or the run's end. */
  private watch(live: LiveRun, input: LaunchInput, placed: PlacedRun, proc: SupervisedProcess): Promise<unknown> {
    const { taskId } = live;
    if (live.pendingStop) this.stop(live, live.pendingStop);
    const where = { process: { pid: proc.pid, startTime: proc.startTime, machine: placed.host.machine }, placement: placementRecord(placed) };
    live.processSaved = this.$.lifecycle.recordProcess(taskId, input.record.bootId, where);
    proc.ended
      .then((end) => {
        if (end.lost !== undefined) this.$.log(`lost track of the process of ${taskId}`, end.lost);
        return this.ended(live, input, placed, end);
      })
      .catch((error: unknown) => this.$.log(`could not finalise ${taskId}`, error));
    return live.processSaved;
  }

  /**
   * Its process ended: the agent's verdict is read, and the turn policies decide what follows
   * (runs/turn-policy.ts): another turn on its session, in a new process, or the run's end. A turn
   * already decided with its session open (ACP) is not decided again.
   */
  private async ended(live: LiveRun, input: LaunchInput, placed: PlacedRun, end: ProcessEnd): Promise<void> {
    // A guard's stop cuts short a decision its open session was waiting on.
    if (live.process?.stopped) live.halt.abort();
    const { redact } = live;
    if (redact) end = { ...end, stdout: redact(end.stdout, end.truncated), stderr: redact(end.stderr, end.truncated) };
    const verdict = this.ending.verdictOf(live, end.exitCode);
    live.verdict = live.earlier ? laterTurn(live.earlier, verdict) : verdict;
    const prompt = live.turnDecided ? undefined : await this.nextTurn(live, input, false, end.exitCode);
    const agentSessionId = live.verdict.agentSessionId;
    if (prompt !== undefined && agentSessionId !== undefined) {
      try {
        const proc = await this.start(input, live, placed, { prompt, agentSessionId });
        live.process = proc;
        await this.watch(live, input, placed, proc);
        return;
      } catch (error) {
        this.$.log(`turn ${live.asked.length + 1} of ${live.taskId} could not start`, error);
      }
    }
    // A stop that came when no process ran ends it as that stop.
    if (live.pendingStop && !live.process?.stopped) live.endedBy = STOPS[live.pendingStop];
    // Follow-ups that came after its last turn was decided: the run ends without them, and says so.
    for (const m of live.followUps.splice(0)) this.$.events.append(live.taskId, 'follow-up', { id: m.id, state: 'dropped', chars: m.text.length });
    await this.ending.finalize(live, processOutcome(end));
    this.inboxCommand.dropSchema(live.taskId);
  }

  /**
   * A turn ended (`open`: its session still is): the turn policies are asked, unless the service
   * stopped it. Another turn is noted on its timeline and its prompt returned; a policy's end is kept for its final record.
   */
  private async nextTurn(live: LiveRun, input: LaunchInput, open: boolean, exitCode: number | null): Promise<string | undefined> {
    const { verdict } = live;
    const stored = this.$.records.current(live.taskId);
    const stopped = () => live.ending || live.process?.stopped !== undefined || live.pendingStop !== undefined;
    if (!verdict || !stored || stopped()) return undefined;
    const { adapter } = live.reservation;
    // An open session's agent prints nothing while the policies decide (a check may take minutes): not a stall.
    const release = open ? live.questions?.hold() : undefined;
    const outcome = await decideTurn(
      this.$.turnPolicies,
      {
        record: { ...publicRecord(stored), outputSchema: outputSchemaOf(stored) },
        adapter,
        verdict,
        answer: answerOf(live, verdict, adapter.structuredOutput === 'native'),
        turn: live.asked.length + 1,
        asked: [...live.asked],
        canContinue: open || (adapter.supportsResume && verdict.agentSessionId !== undefined),
        succeeded: exitCode === 0 && verdict.error === undefined && verdict.limit === undefined,
        ...turnHands(this.$, { live, owner: stored.bootId, open }),
        grade: (request, signal) => this.$.grader.grade({ workspace: input.workspace, record: stored, apiUrl: input.apiUrl }, request, signal),
      },
      { log: this.$.log, halt: live.halt.signal },
    ).finally(() => release?.());
    live.turnDecided = open;
    if (!outcome || stopped()) return undefined;
    if ('end' in outcome) {
      live.endedBy = outcome.end;
      return undefined;
    }
    live.asked.push(outcome.next.policy);
    live.earlier = verdict;
    live.usageBefore = this.ending.usageOf(live, verdict);
    live.turnDecided = false;
    this.$.events.append(live.taskId, 'message', redactValue({ text: `(the service asks again: ${outcome.next.reason})` }, live.redact));
    return outcome.next.prompt;
  }

  /** Stops its process; with none running (being spawned, or between turns), the stop waits for the next or ends the run. */
  stop(live: LiveRun, reason: ServiceStop): void {
    live.halt.abort();
    const grace = reason === 'shutdown' ? SHUTDOWN_GRACE_MS : KILL_GRACE_MS;
    if (live.process?.stop(STOPS[reason], grace)) return;
    if (!live.process?.stopped) live.pendingStop ??= reason;
    live.beside?.stop(STOPS[reason], grace);
  }

  /** Removes the folder of the `headless-inbox` launcher and the sandboxes'. */
  close(): void {
    this.inboxCommand.close();
    this.$.sandbox.close();
  }
}

/** A run's guards: the watchdog, then its budget, a stall guard and a memory ceiling where they are set. */
function guardsOf(record: StoredRun, o: { timeoutMs: number; toolCalls: number; stallTimeoutMs?: number; maxMemoryMb?: number }): Guard[] {
  return [
    watchdog(o.timeoutMs),
    ...(record.budget === undefined ? [] : [budgetGuard(record.budget, o.toolCalls)]),
    ...(o.stallTimeoutMs === undefined ? [] : [stallGuard(o.stallTimeoutMs)]),
    ...(o.maxMemoryMb === undefined ? [] : [memoryGuard(o.maxMemoryMb)]),
  ];
}
