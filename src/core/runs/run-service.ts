/**
 * @module The run lifecycle, composed (a façade the routes, schedules and the fleet call):
 * admission takes a slot and the Session, the lifecycle makes the record durable, the launcher
 * runs the process and ends it (releasing the reservation, storing the final record, and only
 * then announcing it). A start that finds no slot (or, when asked, its Session busy) waits in
 * the queue where one is configured; the queue starts it later.
 */
import { Refusal } from '../../contract/problems';
import { hasEnded, type RunChangesView, type RunRecord, type RunSecret } from '../../contract/records';
import { specOf } from '../../contract/requests';
import { viewOf } from '../delivery/outbox';
import type { Webhooks } from '../delivery/webhooks';
import type { RunEvents } from '../events/run-events';
import type { Fleet, FleetAnswer, FleetRequest } from '../fleet/fleet';
import type { Log } from '../logger';
import type { ProcessOutput } from '../process/spawner';
import { publicRecord } from '../public-record';
import { DEFAULT_QUEUE, type QueuePolicy, queuePolicy } from '../queue/policy';
import type { RunQueue } from './run-queue';
import { type Share, ShareSeats } from '../queue/shares';
import type { SessionBook } from '../sessions';
import type { HeadlessStore } from '../store/keyv-store';
import type { QueueSettings, RunOrigin, SlotShare, StoredRun, WebhookTarget, Workspace } from '../types';
import { settleWithin } from '../util/settle-within';
import type { Admission, Reservation } from './admission';
import { cancelElsewhere } from './cancel';
import { type FollowUpTaken, FollowUps } from './follow-ups';
import type { DailyUsage, WorkspaceDay } from './daily-limits';
import type { LaunchInput, RunLauncher } from './launcher';
import type { RunLifecycle } from './lifecycle';
import type { RunOutputView, StartedRun } from './live-run';
import type { RunProcesses } from '../process/run-membership';
import type { Placements } from './placements';
import { newRunRecord, outputSchemaOf, startedEvent } from './new-record';
import { type ResolvedSpec, policyOf, resolveSpec } from './run-spec';
import { publishUnavailable } from '../worktrees/publish-settings';
import type { RunStarter, StartInput } from './run-starter';
import { tailOf } from './output-tail';
import type { RunRecords } from './records';
import { type RunSecrets, redactValue } from './run-secrets';
import type { Approvals } from '../approvals/approvals';
import { newSortableId } from '../util/ids';
import { takeOverRuns } from './recovery';
import { judgeAnswer, schemaProblem } from './structured-output';
import { type ListQuery, listRuns } from './run-list';
import { type UsageDay, usageByDay } from './usage-report';

const SHUTDOWN_WAIT_MS = 6000;
const API_SOURCE = { kind: 'api' } as const;

export interface RunServiceResources {
  admission: Admission;
  lifecycle: RunLifecycle;
  launcher: RunLauncher;
  queue: RunQueue;
  sessions: SessionBook;
  events: RunEvents;
  webhooks: Webhooks;
  fleet: Fleet;
  records: RunRecords;
  placement: Placements;
  daily: DailyUsage;
  log: Log;
  store: HeadlessStore;
  instanceId: string;
  runSecrets: RunSecrets;
  approvals: Approvals;
  /** The installation's queue; workspaces may set their own. */
  queueSettings?: QueueSettings;
  /** The installation's guards: the lowest layer of every run's spec, which a start may only lower. */
  guards: { stallTimeoutMs?: number; maxMemoryMb?: number };
  /** Whether this instance runs the workspace's agents; in a fleet, the others' starts are queued for the members that do. */
  runsHere(workspace: Workspace): boolean;
}

/** A start whose spec is resolved: what accepting it takes. */
interface Accepting extends StartInput {
  origin: RunOrigin;
  spec: ResolvedSpec;
  /** Its source's runs at once. */
  share?: SlotShare;
  /** The secrets it is given, by name (runs/run-secrets.ts). */
  secrets?: RunSecret[];
}

export class RunService implements RunStarter {
  /** Per workspace with daily limits: its starts being accepted, one after another. */
  private readonly dayChains = new Map<string, Promise<unknown>>();
  /** Each source's runs here, running or queued: its share of the queue. */
  private readonly seats = new ShareSeats();

  private readonly followUps: FollowUps;

  constructor(private readonly $: RunServiceResources) {
    this.followUps = new FollowUps({ ...$, find: (taskId) => this.find(taskId) });
  }

  /** Loads what start-up needs. */
  async load(): Promise<void> {
    await this.$.admission.loadLastAgents();
    await this.$.records.load();
  }

  /** Starts taking runs from the queue (after crash recovery). */
  startQueue(): Promise<void> {
    return this.$.queue.start();
  }

  /** Interrupts the runs that gone instances left `running` (an earlier boot's, at start-up). */
  async takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<number> {
    const { records, lifecycle, sessions, log, instanceId } = this.$;
    const hostOf = (run: StoredRun) => this.$.placement.hostOf(run);
    const answerOf = async (id: string) => (await this.$.approvals.get(id))?.answer;
    const ended = await takeOverRuns({ records, lifecycle, sessions, log, isGone, instanceId, shared: this.$.fleet.shared, hostOf, answerOf });
    await this.$.queue.placeOrphans(isGone);
    return ended;
  }

  /** After crash recovery: what ended runs left where they were placed (a crashed run's worktree) is settled and released. */
  async sweepPlaces(workspaces: Workspace[]): Promise<void> {
    const ended = async (taskId: string) => {
      const run = await this.find(taskId);
      if (run === undefined) return {};
      return hasEnded(run.status) && !this.$.lifecycle.isHere(taskId) ? { ...(run.changes ? { changes: run.changes } : {}) } : undefined;
    };
    await this.$.placement.sweep({ workspaces, ended }, this.$.log);
  }

  /** Acts on another instance's request about a run of this one: a cancel, or a follow-up (its text in the store). */
  async answer(request: Extract<FleetRequest, { op: 'cancel' | 'message' }>): Promise<FleetAnswer> {
    if (!this.$.launcher.get(request.taskId)) return { ok: false, code: 'run_not_running', message: `Run "${request.taskId}" has already ended.` };
    if (request.op === 'cancel') await this.cancel(request.taskId);
    else await this.followUps.takeForwarded(request.taskId, request.id);
    return { ok: true };
  }

  /** A caller's follow-up for a running run (docs/http-api.md: Follow-ups): given to its agent at its next turn. */
  message(taskId: string, text: string): Promise<FollowUpTaken> {
    return this.followUps.send(taskId, text);
  }

  /** This instance's running runs' processes: an answer from one of them is refused (docs/approvals.md). */
  processes(): RunProcesses {
    const live = this.$.launcher.all();
    const pids = new Map(live.flatMap(({ process, taskId }) => (process ? [[process.pid, taskId] as const] : [])));
    return { pids, taskIds: new Set(live.map((l) => l.taskId)) };
  }

  /** This instance's lease ran out and its runs were recorded `interrupted` elsewhere: they are stopped. */
  abandon(): void {
    for (const live of this.$.launcher.all()) this.$.launcher.stop(live, 'shutdown');
  }

  /** Starts a run, or queues it; `taskId` is the id an idempotent start planned for it. */
  async start(input: StartInput): Promise<StartedRun> {
    const spec = this.resolve(input);
    // Another member may take a run of a shared fleet: a value held here could not go with it.
    const secrets = this.$.runSecrets.accept(input.request.secrets, { shared: this.$.fleet.shared });
    if (secrets === undefined) return this.startResolved(input, spec);
    // A variable can reconfigure an agent (its config, its provider's URL, its tools): a run its operator confines gets none from a start.
    if (spec.permissions !== 'full') {
      throw new Refusal(
        'policy_loosened',
        `Field "secrets" cannot be given to a run with "permissions": "${spec.permissions}": a variable can turn an agent's tools back on or send its provider's key elsewhere; secrets go to "full" runs only.`,
      );
    }
    // Its id planned now: its values are held under it before anything could launch it.
    const taskId = input.taskId ?? newSortableId('run_');
    this.$.runSecrets.hold(taskId, secrets.given);
    try {
      return await this.startResolved({ ...input, taskId }, spec, secrets.recorded);
    } catch (error) {
      this.$.runSecrets.drop(taskId);
      throw error;
    }
  }

  private async startResolved(input: StartInput, spec: ResolvedSpec, secrets?: RunSecret[]): Promise<StartedRun> {
    const { workspace, origin = {} } = input;
    // Where it runs elsewhere, the member that takes it checks its own folder.
    const refusal = this.$.runsHere(workspace) ? await this.$.placement.check({ workspace, policy: policyOf(spec) }) : undefined;
    if (refusal !== undefined) throw new Refusal('worktree_unavailable', `${refusal}.`);
    const share = origin.share === undefined ? undefined : this.shareOf(workspace, origin.share);
    // Taken before any wait, so simultaneous starts of one source never all pass the check.
    const seat = share === undefined ? undefined : this.seats.take(share);
    try {
      const slots = share === undefined ? undefined : { key: share.key, running: share.running };
      const accepting: Accepting = { ...input, origin, spec, ...(slots ? { share: slots } : {}), ...(secrets ? { secrets } : {}) };
      const accepted = await this.withinDailyLimits(workspace, origin, () => this.accept(accepting));
      const run = 'queued' in accepted ? accepted.queued : await this.$.launcher.launch(accepted.launch);
      if (seat) void run.done.catch(() => undefined).finally(() => seat.release());
      return run;
    } catch (error) {
      seat?.release();
      throw error;
    }
  }

  /** The run's spec: the start's over its origin's, over its workspace's, once (runs/run-spec.ts). */
  private resolve({ workspace, request, origin }: StartInput): ResolvedSpec {
    const publishFromStarts = workspace.publishTo?.fromStarts === true;
    const decided = resolveSpec({ installation: this.$.guards, workspace: workspace.run, origin: origin?.run, request: specOf(request), publishFromStarts });
    if ('refused' in decided) throw new Refusal('policy_loosened', `Field "${decided.refused.field}" cannot be loosened: ${decided.refused.detail}.`);
    const { spec } = decided;
    const schema = spec.outputSchema === undefined ? undefined : schemaProblem(spec.outputSchema);
    if (schema !== undefined) throw new Refusal('invalid_body', `Field "outputSchema" is invalid: ${schema}.`);
    const unknown = this.$.placement.notRegistered(spec.isolation);
    if (unknown !== undefined) throw new Refusal('invalid_body', `Field "isolation" is invalid: ${unknown}.`);
    const unpublishable = publishUnavailable(workspace, spec);
    if (unpublishable !== undefined) throw new Refusal('invalid_body', `Field "publish" cannot be met: ${unpublishable}.`);
    return spec;
  }

  /** A source's share, its defaults filled in: half the run slots, a quarter of the workspace's queue (at least one each). */
  private shareOf(workspace: Workspace, share: NonNullable<RunOrigin['share']>): Share {
    const queue = queuePolicy(this.$.queueSettings, workspace) ?? DEFAULT_QUEUE;
    return {
      key: share.key,
      running: share.running ?? Math.max(1, Math.floor(this.$.admission.slots / 2)),
      queued: share.queued ?? Math.max(1, Math.floor(queue.max / 4)),
    };
  }

  /**
   * Accepts a start under its workspace's and its schedule's or trigger's daily limits. Where there
   * are limits, the workspace's starts are accepted one at a time (across a fleet, under its lock),
   * so two at once never both take the day's last run.
   */
  private async withinDailyLimits<T>(workspace: Workspace, origin: RunOrigin, accept: () => Promise<T>): Promise<T> {
    const source = origin.source;
    const from = source && source.kind !== 'api' ? { kind: source.kind, name: source.name, limits: origin.limits } : undefined;
    if (workspace.limits === undefined && from?.limits === undefined) return accept();
    const previous = this.dayChains.get(workspace.id) ?? Promise.resolve();
    // In a fleet, one instance at a time too: the count and the record it adds are one step.
    const turn = previous.then(() =>
      this.$.fleet.exclusive(
        `daily:${workspace.id}`,
        async () => {
          const over = await this.$.daily.refusal({ workspaceId: workspace.id, workspace: workspace.limits, origin: from });
          if (over) throw new Refusal('daily_limit_reached', `${over.detail}; it starts again at 00:00 UTC.`, { retryAfterSeconds: over.retryAfterSeconds });
          return accept();
        },
        { nests: true },
      ),
    );
    const tail = turn.catch(() => undefined);
    this.dayChains.set(workspace.id, tail);
    void tail.then(() => this.dayChains.get(workspace.id) === tail && this.dayChains.delete(workspace.id));
    return turn;
  }

  /** Admits a start and makes its record durable (or queues it): what launching it needs. */
  private async accept(a: Accepting): Promise<{ queued: StartedRun } | { launch: LaunchInput }> {
    const { admission, events, records } = this.$;
    const { workspace, request, origin, spec } = a;
    const webhookTargets = this.$.webhooks.targetsFor(workspace, request.webhook, origin.reply);
    const enqueue = async (policy: QueuePolicy) => ({ queued: await this.$.queue.enqueue({ ...a, policy, webhookTargets }) });
    // Run by other members of the fleet: queued for them, whatever the workspace's own queue says.
    if (!this.$.runsHere(workspace)) return enqueue(queuePolicy(this.$.queueSettings, workspace) ?? DEFAULT_QUEUE);
    const before = origin.after === undefined ? undefined : await this.find(origin.after);
    // Behind a run that has not ended (a schedule's overlap "queue"): queued, with or without a queue configured.
    if (before && !hasEnded(before.status)) return enqueue(queuePolicy(this.$.queueSettings, workspace) ?? DEFAULT_QUEUE);
    const decision = await admission.admit(
      workspace,
      { agent: spec.agent, resumeId: request.resumeId, continues: spec.verify !== undefined },
      a.taskId,
      a.share,
    );
    if ('wait' in decision) {
      // A trigger's burst waits in the default queue where none is configured, unless the workspace has `queue: false`.
      const fallback = origin.queueWhenBusy && workspace.queue !== false ? DEFAULT_QUEUE : undefined;
      const policy = queuePolicy(this.$.queueSettings, workspace) ?? fallback;
      if (policy && (decision.wait === 'capacity' || request.waitForSession === true)) return enqueue(policy);
      throw decision.problem;
    }
    const reservation = decision.admitted;
    const { resumeId, adapter } = reservation;
    // Opened first, so a reader who learns of the run finds its timeline.
    const source = origin.source ?? API_SOURCE;
    const agent = adapter.name;
    events.open(startedEvent({ taskId: reservation.taskId, resumeId, workspaceId: workspace.id, agent, wait: request.wait, spec, source }));
    let record: StoredRun;
    try {
      record = await this.admitRecord(a, reservation, webhookTargets);
    } catch (error) {
      events.discard(reservation.taskId);
      records.untrack(reservation.taskId);
      await reservation.release();
      throw error;
    }
    admission.rememberAgent(workspace.id, agent);
    return { launch: { workspace, prompt: request.prompt, apiUrl: a.apiUrl, reservation, record, traceparent: origin.traceparent } };
  }

  /** Makes the Session and the `running` record durable; nothing is acknowledged before. */
  private async admitRecord(a: Accepting, reservation: Reservation, webhookTargets: WebhookTarget[]): Promise<StoredRun> {
    const { adapter, resumeId, taskId } = reservation;
    const workspaceId = a.workspace.id;
    const now = new Date().toISOString();
    if (reservation.session) await this.$.sessions.update(resumeId, (s) => ({ lastRunAt: now, runCount: s.runCount + 1 }));
    else await this.$.sessions.create({ resumeId, workspaceId, agent: adapter.name, retired: false, createdAt: now, lastRunAt: now, runCount: 1 });
    const record = newRunRecord({
      taskId,
      resumeId,
      workspaceId,
      agent: adapter.name,
      ...(reservation.chosenBy ? { chosenBy: reservation.chosenBy } : {}),
      wait: a.request.wait,
      spec: a.spec,
      owner: this.$.instanceId,
      webhookTargets,
      now,
      source: a.origin.source ?? API_SOURCE,
      secrets: a.secrets,
    });
    await this.$.lifecycle.accept(record);
    return record;
  }

  /** A stored run, here or in the store. */
  async find(taskId: string): Promise<StoredRun | undefined> {
    return this.$.records.current(taskId) ?? (await this.$.records.find(taskId));
  }

  async get(taskId: string): Promise<RunRecord> {
    const stored = await this.find(taskId);
    if (!stored) throw new Refusal('run_not_found', `No run "${taskId}".`);
    const record = await this.$.queue.withPosition(stored);
    return stored.webhookTargets ? { ...record, webhooks: viewOf(stored) } : record;
  }

  /** A run's record, with its stored output once it has ended; undefined if there is no such run. */
  async result(taskId: string): Promise<{ record: RunRecord; output?: ProcessOutput } | undefined> {
    const stored = await this.find(taskId);
    if (!stored) return undefined;
    const output = hasEnded(stored.status) ? await this.$.records.output(taskId) : undefined;
    return { record: publicRecord(stored), ...(output ? { output } : {}) };
  }

  /**
   * A running run's answer, sent by its agent: checked against its outputSchema; one that matches
   * ends the run, `succeeded` with it as its `result`; one that does not is refused, saying why, so
   * the agent can send it again.
   */
  async submitResult(taskId: string, value: unknown): Promise<{ taskId: string; accepted: true }> {
    const live = this.$.launcher.get(taskId);
    const record = this.$.records.current(taskId);
    if (!live || !record || live.ending || live.answer) {
      if (!(await this.find(taskId))) throw new Refusal('run_not_found', `No run "${taskId}".`);
      throw new Refusal('run_not_running', `Run "${taskId}" is not running here, or already has its answer.`);
    }
    const schema = outputSchemaOf(record);
    if (schema === undefined) throw new Refusal('invalid_body', `Run "${taskId}" was started without an outputSchema: it takes no result.`);
    const judged = judgeAnswer(schema, { value });
    if ('problem' in judged) throw new Refusal('output_invalid', `The answer does not match: ${judged.problem}. Fix it and send it again.`);
    // Judged as sent; kept without the run's secrets.
    live.answer = { value: this.withoutSecrets(taskId, value) };
    this.$.launcher.stop(live, 'result');
    return { taskId, accepted: true };
  }

  /** What a workspace, and each of its schedules and triggers, started and spent today (UTC), with its daily limits. */
  usage(workspace: Workspace): Promise<WorkspaceDay> {
    return this.$.daily.day(workspace.id, workspace.limits);
  }

  /** Spend and tokens of these workspaces' runs, per UTC day for the last `days` days, today first. */
  usageByDay(workspaceIds: string[], days: number): Promise<UsageDay[]> {
    return usageByDay(this.$.records, workspaceIds, days);
  }

  /** What a run in a worktree changed, with its patch, once it has ended. */
  async changes(taskId: string): Promise<RunChangesView> {
    const stored = await this.find(taskId);
    if (!stored) throw new Refusal('run_not_found', `No run "${taskId}".`);
    if (!stored.changes) {
      const why = stored.policy?.worktree ? 'has not ended, or what it changed could not be read (its worktree is kept)' : 'did not run in a worktree';
      throw new Refusal('changes_not_found', `Run "${taskId}" ${why}.`);
    }
    const patch = await this.$.records.patch(taskId);
    return { taskId, changes: stored.changes, patch: patch?.text ?? '', patchTruncated: patch?.truncated ?? false };
  }

  /** What a running run sends out (an Inbox item), without its secrets. */
  withoutSecrets<T>(taskId: string, value: T): T {
    return redactValue(value, this.$.launcher.get(taskId)?.redact);
  }

  /** The last `bytes` bytes of each stream of a run, running or ended. */
  async output(taskId: string, bytes: number): Promise<RunOutputView> {
    const live = this.$.launcher.get(taskId);
    const record = await this.get(taskId);
    const running = live?.process && !live.ending ? live.process.output() : undefined;
    // What a running agent printed so far, without its secrets (an ended run's was stored so).
    const redact = live?.redact;
    const shown =
      running && redact ? { ...running, stdout: redact(running.stdout, running.truncated), stderr: redact(running.stderr, running.truncated) } : running;
    const output = shown ?? (await this.$.records.output(taskId));
    return { taskId, status: record.status, ...tailOf(output, bytes), retained: output !== undefined };
  }

  async list(query: ListQuery): Promise<{ runs: RunRecord[]; nextCursor: string | null }> {
    const page = await listRuns(this.$.records, query);
    return { ...page, runs: await this.$.queue.positions(page.runs) };
  }

  /** Cancels a run of this instance, a queued run, or asks the instance that runs it. */
  async cancel(taskId: string): Promise<RunRecord> {
    const live = this.$.launcher.get(taskId);
    if (!live) {
      const ended = (await this.find(taskId))?.status === 'queued' ? await this.$.queue.cancel(taskId) : undefined;
      if (ended) return ended;
      return cancelElsewhere({ find: (id) => this.find(id), fleet: this.$.fleet, instanceId: this.$.instanceId }, taskId);
    }
    const stopReason = live.process?.stopped?.reason ?? live.pendingStop;
    if (live.ending || (stopReason !== undefined && stopReason !== 'cancel')) throw new Refusal('run_not_running', `Run "${taskId}" is already stopping.`);
    this.$.launcher.stop(live, 'cancel');
    const current = this.$.records.current(taskId);
    return current ? publicRecord(current) : this.get(taskId);
  }

  /** Refuses new starts, stops every running run (recorded `interrupted`) and waits, bounded; queued runs stay queued, and whoever waits for one is told so. */
  async shutdown(): Promise<void> {
    this.$.admission.close();
    this.$.queue.stop();
    await this.$.lifecycle.close();
    const runs = this.$.launcher.all();
    for (const live of runs) this.$.launcher.stop(live, 'shutdown');
    await settleWithin(
      runs.map((r) => r.done),
      SHUTDOWN_WAIT_MS,
    );
    await this.$.events.close();
    await this.$.lifecycle.closeWrites();
    this.$.launcher.close();
  }
}
