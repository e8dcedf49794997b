import { checkSchedules } from './schedules/schedule-spec';
import { checkGuards } from './runs/guards';
import { Scheduler } from './schedules/scheduler';
import { DeliveryLog } from './triggers/deliveries';
import { TriggerService } from './triggers/trigger-service';
import { replyContext } from './triggers/reply-spec';
import { type Trigger, loadTriggers } from './triggers/trigger-spec';
import { checkOriginsPublish } from './worktrees/publish-settings';
import { heldSecrets, namedSecrets } from './service-secrets';
import { diagnoseWorkspace } from './agents/doctor';
import { probeEnv } from './agents/preflight';
import { AgentRegistry } from './agents/registry';
import { Webhooks } from './delivery/webhooks';
import { RunEvents } from './events/run-events';
import { type Fleet, createFleet } from './fleet/index';
import { Refusal, StorageError } from '../contract/problems';
import type { RouteServices } from './http/router';
import { IdempotencyKeys } from './idempotency';
import { Inbox } from './inbox';
import { Approvals } from './approvals/approvals';
import { type HeadlessLogger, type Log, errorLog } from './logger';
import { logObserver } from './telemetry/log-observer';
import { createMetrics } from './telemetry/metrics';
import { type ServiceObserver, createObserver } from './telemetry/observer';
import { RunTracing } from './telemetry/run-tracing';
import type { HeadlessHandlerOptions } from './options';
import { createExecaSpawner } from './process/spawner';
import { checkQueueSettings } from './queue/policy';
import { Retention } from './retention';
import { Admission } from './runs/admission';
import type { RunRecords } from './runs/records';
import { type RunRecordWriter, openRunRecords } from './runs/record-writer';
import { outboxRecords } from './runs/outbox-writes';
import { RunLauncher } from './runs/launcher';
import { turnPolicies } from './runs/turn-policies';
import { RunLifecycle } from './runs/lifecycle';
import { inWorkspace } from './runs/placement';
import { runGrader } from './runs/grader';
import { Placements, checkIsolation } from './runs/placements';
import { WorktreePlacement, checkWorktreeSettings } from './worktrees/worktree-placement';
import { DailyUsage, checkDailyLimits } from './runs/daily-limits';
import { DEFAULT_PRICES, checkPrices } from './agents/prices';
import { RunService } from './runs/run-service';
import { RunQueue } from './runs/run-queue';
import { RunTokens } from './runs/tokens';
import { RunSecrets } from './runs/run-secrets';
import { SessionBook } from './sessions';
import { type HeadlessStore, asHeadlessStore } from './store/keyv-store';
import { createMemoryKeyv } from './store/keyvs';
import { Workspaces, checkLabels } from './workspaces';
import { checkNetwork } from './sandbox/network';
import { checkSpecLayer, loosens, originLayer, refuseMovedKeys } from './runs/run-spec';
import { Sandbox } from './sandbox/sandbox';

/** Start-up recovery the store refused (a full disk) is tried again this often, until it succeeds. */
const RECOVERY_RETRY_MS = 5000;

/** A readiness probe waits this long for the store. */
const READY_PROBE_MS = 2000;

/** One unit's part in the service's life: started in build order, closed in reverse. */
interface Stage {
  start?(): Promise<void> | void;
  close?(): Promise<void>;
}

/** What the units share, each taking the part it needs (its own `*Resources` type is a subset). */
export interface ServiceResources {
  options: HeadlessHandlerOptions;
  logger: HeadlessLogger;
  log: Log;
  env: NodeJS.ProcessEnv;
  registry: AgentRegistry;
  store: HeadlessStore;
  tokens: RunTokens;
  /** Per-run secrets: the values starts gave (in memory), the operator's named ones (runs/run-secrets.ts). */
  runSecrets: RunSecrets;
  fleet: Fleet;
  instanceId: string;
  workspaces: Workspaces;
  sessions: SessionBook;
  inbox: Inbox;
  events: RunEvents;
  records: RunRecords;
  writer: RunRecordWriter;
  metrics: ReturnType<typeof createMetrics>;
  tracing?: RunTracing;
  observe: ServiceObserver;
  webhooks: Webhooks;
  daily: DailyUsage;
  approvals: Approvals;
  triggers: Map<string, Trigger>;
}

/**
 * The composition root's work: every unit built once from the options, wired by name, and one
 * ordered stack that starts them and closes them in reverse.
 */
export function buildResources(options: HeadlessHandlerOptions, logger: HeadlessLogger) {
  const $ = buildFoundation(options, logger);
  const runs = buildRuns($);
  const { store, fleet, inbox, webhooks, records, events, sessions, log } = $;
  const retentionDays = options.retentionDays ?? 30;
  if (!Number.isFinite(retentionDays) || retentionDays < 0) throw new Error(`retentionDays must be a number of days, 0 or more, not ${retentionDays}`);
  const idempotency = new IdempotencyKeys(store, fleet, log);
  const scheduler = buildScheduler($, runs, idempotency);
  const deliveries = new DeliveryLog(store);
  const triggers = buildTriggers($, runs, idempotency, deliveries);
  const retention = new Retention({ days: retentionDays, records, events, inbox, sessions, idempotency, deliveries, approvals: $.approvals, log, logger });
  const recovery = recoveryOf($, runs);
  // Closed in reverse: retention, then runs (recorded while the lease still holds), webhooks, the lease, the store.
  const stages: Stage[] = [
    { close: () => store.close() },
    { close: () => fleet.leave() },
    { close: () => webhooks.close() },
    { start: () => inbox.load() },
    { start: () => $.approvals.load() },
    { start: () => deliveries.load() },
    { start: () => runs.load(), close: () => runs.shutdown() },
    {
      start: () =>
        fleet.join({
          takeOver: recovery.takeOver,
          answer: (request) => (request.op === 'approval' ? $.approvals.wake(request.id).then(() => ({ ok: true as const })) : runs.answer(request)),
          lost: () => {
            records.clear();
            runs.abandon();
          },
          reconnected: () => {
            records.clear();
            void $.approvals.wakeAll();
          },
          changed: (taskId, workspaceId) => records.evict(taskId, workspaceId),
        }),
      close: recovery.close,
    },
    { start: () => runs.sweepPlaces($.workspaces.all() ?? []) },
    // Told before its queues are worked: a start elsewhere finds the workspaces it runs.
    {
      start: async () => {
        if (!fleet.shared) return;
        const { registry, env, workspaces } = $;
        await fleet.advertise(await workspaces.advertisable((ws) => registry.installedFor(ws, probeEnv(env, ws.env))));
      },
    },
    { start: () => runs.startQueue() },
    { start: () => scheduler.start(), close: async () => scheduler.stop() },
    { start: () => retention.start(), close: () => retention.close() },
  ];
  return {
    services: routeServices($, { runs, idempotency, schedules: scheduler, triggers }),
    tokens: $.tokens,
    async start(): Promise<void> {
      for (const stage of stages) await stage.start?.();
    },
    /** Closes every unit, in reverse. */
    async close(): Promise<void> {
      for (const stage of [...stages].reverse()) await stage.close?.();
    },
  };
}

/** The store, the fleet, the records and what observes them; the options each is checked on. */
function buildFoundation(options: HeadlessHandlerOptions, logger: HeadlessLogger): ServiceResources {
  const log = errorLog(logger);
  const registry = new AgentRegistry(options.agents);
  const store: HeadlessStore = asHeadlessStore(options.store ?? createMemoryKeyv());
  const fleet: Fleet = createFleet(store, { leaseMs: options.instanceLeaseMs, log });
  const labels = checkLabels(options.labels, 'labels');
  const workspaces = new Workspaces(options.workspaces, { shared: fleet.shared, labels, advertised: (id) => fleet.advertised(id), log });
  const sessions = new SessionBook(store, fleet, (agent) => registry.get(agent)?.supportsResume ?? false, log);
  const events = new RunEvents({ store, log });
  const { records, writer } = openRunRecords({ store, log, shared: fleet.shared, fresh: () => fleet.hearsChanges() });
  const daily = new DailyUsage({ records });
  const limited = () => (workspaces.all() ?? []).filter((w) => w.limits !== undefined);
  const metrics = createMetrics({
    queued: async () => (await records.inStatus('queued')).length,
    today: () => Promise.all(limited().map((w) => daily.day(w.id, w.limits))),
  });
  const tracing = options.tracer && new RunTracing({ tracer: options.tracer, events: async (r) => (await events.page(r, 0, 100_000)).events, log });
  const runSecrets = new RunSecrets(namedSecrets(options, options.env ?? process.env));
  // A run's secrets are held only until it ends, however it ends (queued ones expire or are cancelled too).
  const forget = { runEnded: (run: { taskId: string }) => runSecrets.drop(run.taskId) };
  const observe = createObserver([logObserver(logger), metrics.observer, ...(tracing ? [tracing.observer()] : []), forget], (error) =>
    log('an observer failed', error),
  );
  const webhooks = new Webhooks({
    ...options.webhooks,
    records: outboxRecords(records, writer, fleet.instanceId),
    instanceId: fleet.instanceId,
    log,
    observe,
    workspace: (id) => workspaces.find(id),
    replyOf: (run) => {
      const reply = run.source?.kind === 'trigger' ? triggers.get(run.source.name)?.reply : undefined;
      return reply && replyContext(reply, run.taskId, options.apiUrl ?? '');
    },
  });
  checkQueueSettings(options.queue, 'queue');
  checkGuards({ stallTimeoutMs: options.stallTimeoutMs, maxMemoryMb: options.maxMemoryMb, minFreeMemoryMb: options.minFreeMemoryMb }, '');
  if (!fleet.shared && workspaces.all()?.length === 0) throw new Error('workspaces is empty: alone (no fleet to queue its starts for) nothing could run');
  for (const ws of workspaces.all() ?? []) {
    refuseMovedKeys(ws, `workspace "${ws.id}"`);
    checkSpecLayer(ws.run, `workspace "${ws.id}"`, { agent: false });
    webhooks.checkWorkspace(ws);
    checkQueueSettings(ws.queue, `workspace "${ws.id}": queue`);
    checkNetwork(ws.network, `workspace "${ws.id}"`);
    checkWorktreeSettings(ws, `workspace "${ws.id}"`);
    checkDailyLimits(ws.limits, `workspace "${ws.id}": limits`);
    checkLabels(ws.labels, `workspace "${ws.id}": labels`);
    // Alone, no other member could ever run it.
    if (!fleet.shared && !workspaces.runsHere(ws))
      throw new Error(`workspace "${ws.id}" asks for labels ${JSON.stringify(ws.labels)} this instance does not have (labels: ${JSON.stringify(labels)})`);
  }
  const origins = [
    ...(options.schedules ?? []).map((s) => ({ where: `schedule "${s.name}"`, workspace: s.workspace, run: s.run })),
    ...(options.triggers ?? []).map((t) => ({ where: `trigger "${t.name}"`, workspace: t.workspace, run: t.run })),
  ];
  checkOriginsPublish(origins, workspaces.all() ?? []);
  const env = options.env ?? process.env;
  // Loaded with the foundation: the outbox sends their replies.
  const triggers = loadTriggers(options.triggers ?? [], (id) => workspaces.all()?.some((w) => w.id === id), env);
  const inbox = new Inbox(store);
  const instanceId = fleet.instanceId;
  const approvals = new Approvals({ store, fleet, instanceId, log });
  return {
    options,
    logger,
    log,
    env,
    registry,
    store,
    tokens: new RunTokens(),
    runSecrets,
    fleet,
    instanceId,
    workspaces,
    sessions,
    inbox,
    events,
    records,
    writer,
    metrics,
    tracing,
    observe,
    webhooks,
    daily,
    approvals,
    triggers,
  };
}

/** The run lifecycle's units: admission, the lifecycle, the launcher, the queue, behind the run service. */
function buildRuns($: ServiceResources): RunService {
  const { options, workspaces } = $;
  const admission = new Admission({
    ...$,
    maxConcurrentRuns: options.maxConcurrentRuns ?? 4,
    minFreeMemoryMb: options.minFreeMemoryMb,
    shared: $.fleet.shared,
    defaultAgent: options.defaultAgent,
    baseEnv: $.env,
    installedElsewhere: (ws) => workspaces.installedElsewhere(ws),
  });
  const spawner = options.spawner ?? createExecaSpawner();
  const placement = placementsOf($);
  const shared = { ...$, admission, placement, spawner };
  const lifecycle = new RunLifecycle(shared);
  const sandbox = buildSandbox(options, workspaces);
  const guards = { stallTimeoutMs: options.stallTimeoutMs, maxMemoryMb: options.maxMemoryMb };
  checkPrices(options.prices, '');
  const prices = { ...DEFAULT_PRICES, ...options.prices };
  const turns = turnPolicies(options.turnPolicies);
  const launcher = new RunLauncher({
    ...shared,
    lifecycle,
    secrets: heldSecrets(options, $.env, workspaces, $.runSecrets.namedValues()),
    baseEnv: $.env,
    sandbox,
    guards,
    prices,
    turnPolicies: turns,
    // A grader is a run like any other, started through the run service built just below.
    grader: runGrader(() => runs),
  });
  const queue = new RunQueue({
    ...shared,
    lifecycle,
    launcher,
    workspace: (id) => workspaces.runnable(id),
    runsHere: () => workspaces.runHere().map((ws) => ws.id),
    ownApiUrl: () => options.apiUrl,
    workspaceTargets: (ws) => $.webhooks.targetsFor(ws),
    loosens: (ws, run) => loosens({ installation: guards, workspace: ws.run, origin: originLayer(options, run.source) }, run.spec),
  });
  const runs: RunService = new RunService({
    ...shared,
    lifecycle,
    launcher,
    queue,
    queueSettings: options.queue,
    guards,
    runsHere: (ws) => workspaces.runsHere(ws),
  });
  return runs;
}

/** The placement chain: the handler's own providers, the worktree, the workspace's folder; every configured `isolation` names one of them. */
function placementsOf($: ServiceResources): Placements {
  const { options, workspaces } = $;
  const worktree = new WorktreePlacement({
    ...(options.worktreeRoot === undefined ? {} : { root: options.worktreeRoot }),
    workspaces: () => workspaces.all() ?? [],
    log: $.log,
  });
  const own = options.placements ?? [];
  const names = own.map((p) => p.name);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new Error(`placements: two providers are named "${twice}"`);
  const placements = new Placements([...own, worktree, inWorkspace]);
  for (const ws of workspaces.all() ?? []) checkIsolation(placements, ws.run, `workspace "${ws.id}"`);
  for (const s of options.schedules ?? []) checkIsolation(placements, s.run, `schedule "${s.name}"`);
  for (const t of options.triggers ?? []) checkIsolation(placements, t.run, `trigger "${t.name}"`);
  return placements;
}

function buildScheduler($: ServiceResources, runs: RunService, idempotency: IdempotencyKeys): Scheduler {
  const { options, workspaces } = $;
  const schedules = options.schedules ?? [];
  checkSchedules(schedules, (id) => workspaces.all()?.some((w) => w.id === id));
  return new Scheduler({
    ...$,
    schedules,
    idempotency,
    runs,
    workspace: (id) => workspaces.require(id),
    apiUrl: () => options.apiUrl ?? '',
  });
}

/**
 * Ends what gone instances left (their running runs, their pending deliveries). Alone, a store
 * that refuses it (a full disk) does not stop the start: it is tried again.
 */
function recoveryOf($: ServiceResources, runs: RunService) {
  let retry: NodeJS.Timeout | undefined;
  const takeOver = async (isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> => {
    try {
      await runs.takeOver(isGone);
      await $.approvals.takeOver(isGone);
      await $.webhooks.takeOver(isGone);
    } catch (error) {
      // In a fleet the sweep comes again by itself, every third of the lease.
      if (!(error instanceof StorageError) || $.fleet.shared) throw error;
      $.log(`crash recovery could not write to the store; it is tried again in ${RECOVERY_RETRY_MS / 1000} s`, error);
      retry = setTimeout(() => void takeOver(isGone).catch((e: unknown) => $.log('crash recovery failed', e)), RECOVERY_RETRY_MS);
      retry.unref();
    }
  };
  return { takeOver, close: async () => clearTimeout(retry) };
}

/** The triggers: each sender's deliveries into runs, started as a schedule's are. */
function buildTriggers($: ServiceResources, runs: RunService, idempotency: IdempotencyKeys, deliveries: DeliveryLog): TriggerService {
  const { options, workspaces, events } = $;
  return new TriggerService({
    ...$,
    deliveries,
    idempotency,
    runs,
    timeline: events,
    workspace: (id) => workspaces.require(id),
    apiUrl: () => options.apiUrl ?? '',
  });
}

/** What the routes call, besides the foundation's units. */
type RouteUnits = Pick<RouteServices, 'runs' | 'idempotency' | 'schedules' | 'triggers'>;

/** What the routes call. */
function routeServices($: ServiceResources, units: RouteUnits): RouteServices {
  const { workspaces, metrics } = $;
  return {
    ...units,
    events: $.events,
    heartbeatMs: $.options.heartbeatMs ?? 15_000,
    sessions: $.sessions,
    inbox: $.inbox,
    approvals: $.approvals,
    workspaces: () => workspaces.publicList(),
    workspace: (id) => workspaces.known(id),
    workspaceToStart: (id) => workspaces.forStart(id),
    metrics: async () => ({ contentType: metrics.registry.contentType, body: await metrics.registry.metrics() }),
    unready: () => unready($),
    diagnose: (workspaceId) => diagnose($, workspaceId),
  };
}

/** Why this instance is not ready: its fleet lease is lost, or the store does not answer in time. */
async function unready({ fleet, store }: ServiceResources): Promise<string | undefined> {
  if (!fleet.leaseHeld()) return 'This instance does not hold its lease in the fleet.';
  const probe = store.get('ready:probe').then(
    () => undefined,
    (error: unknown) => `The store does not answer: ${error instanceof Error ? error.message : String(error)}`,
  );
  const late = new Promise<string>((done) => setTimeout(done, READY_PROBE_MS, 'The store did not answer in time.').unref());
  return Promise.race([probe, late]);
}

/** The agent checks of one workspace, or of every listed one. */
async function diagnose({ workspaces, registry, env, options }: ServiceResources, workspaceId: string | undefined) {
  const listed = workspaces.all();
  if (workspaceId === undefined && !listed) throw new Refusal('invalid_body', 'Query parameter "wsId" is required: workspaces come from a resolver.');
  const targets = workspaceId === undefined ? (listed ?? []) : [await workspaces.require(workspaceId)];
  return Promise.all(targets.map((workspace) => diagnoseWorkspace({ registry, workspace, baseEnv: env, defaultAgent: options.defaultAgent })));
}

/** The sandbox of confined runs: it hides the service's own files and every other listed workspace; bubblewrap must make one up front where one is asked for. */
function buildSandbox(options: HeadlessHandlerOptions, workspaces: Workspaces): Sandbox {
  const listed = workspaces.all() ?? [];
  const sandbox = new Sandbox({ ...options.sandbox, hidden: [...(options.sandbox?.hidden ?? []), ...listed.map((ws) => ws.path)] });
  const wanted = [
    ...listed.filter((ws) => ws.run?.sandbox).map((ws) => `workspace "${ws.id}"`),
    ...(options.schedules ?? []).filter((s) => s.run?.sandbox).map((s) => `schedule "${s.name}"`),
    ...(options.triggers ?? []).filter((t) => t.run?.sandbox).map((t) => `trigger "${t.name}"`),
  ];
  if (wanted.length > 0) {
    try {
      sandbox.check();
    } catch (error) {
      throw new Error(`${wanted[0]} asks for a sandbox, but ${(error as Error).message}`);
    }
  }
  return sandbox;
}
