import { Refusal } from '../../contract/problems';
import type { RunRecord } from '../../contract/records';
import type { HeadlessLogger, Log } from '../logger';
import { type ScopeLimits, limitsOf } from '../runs/daily-limits';
import type { ServiceObserver } from '../telemetry/observer';
import { type Fired, Firing, type FiringDeps, HANDLED_ALREADY, firedElsewhere } from './firing';
import { type ScheduleDefinition, cronOf } from './schedule-spec';

/** Longest single wait: timers are re-armed at least this often (and setTimeout caps at ~24 days). */
const MAX_WAIT_MS = 3_600_000;

/** A schedule as `GET /api/schedules` shows it. */
export interface ScheduleView {
  name: string;
  workspaceId: string;
  cron: string;
  timezone: string;
  overlap: 'skip' | 'queue' | 'allow';
  missed: 'skip' | 'once';
  nextRunAt: string | null;
  lastOccurrence: string | null;
  lastRun: Pick<RunRecord, 'taskId' | 'status'> | null;
}

export interface SchedulerDeps extends FiringDeps {
  schedules: ScheduleDefinition[];
  log: Log;
  logger: HeadlessLogger;
  observe: ServiceObserver;
}

/**
 * Fires the schedules (docs/queue-and-schedules.md): a timer per schedule for its next
 * occurrence (plus its jitter), re-armed from that occurrence so none is skipped by a late timer;
 * at start-up, a schedule whose `missed` is `once` fires its latest occurrence that passed while
 * the service was down. Firing itself (overlap, exactly once in a fleet) is firing.ts's.
 */
export class Scheduler {
  private readonly firing: Firing;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private running = false;

  constructor(private readonly $: SchedulerDeps) {
    this.firing = new Firing($);
  }

  async start(): Promise<void> {
    this.running = true;
    for (const s of this.$.schedules) {
      await this.catchUp(s).catch((error: unknown) => this.$.log(`schedule "${s.name}" could not catch up`, error));
      this.arm(s, new Date());
    }
  }

  stop(): void {
    this.running = false;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  /** `missed: "once"`: the latest occurrence after the last one handled, if it has passed. */
  private async catchUp(s: ScheduleDefinition): Promise<void> {
    if (s.missed !== 'once') return;
    const last = (await this.firing.state(s.name))?.lastOccurrence;
    if (last === undefined) return;
    const next = cronOf(s).nextRun(new Date(last));
    if (!next || next.getTime() > Date.now()) return;
    const latest = cronOf(s).previousRuns(1, new Date())[0] ?? next;
    this.$.logger.info({ schedule: s.name, occurrence: latest.toISOString() }, 'schedule missed an occurrence while the service was down; firing it once');
    await this.fire(s, latest.toISOString());
  }

  /** Waits for the first occurrence after `after`, then fires it and waits for the next. */
  private arm(s: ScheduleDefinition, after: Date): void {
    if (!this.running) return;
    const next = cronOf(s).nextRun(after);
    if (!next) return;
    const jitter = s.jitterMs ? Math.floor(Math.random() * s.jitterMs) : 0;
    const wait = next.getTime() + jitter - Date.now();
    const timer = setTimeout(
      () => {
        if (wait > MAX_WAIT_MS) return this.arm(s, after);
        void this.fire(s, next.toISOString()).finally(() => this.arm(s, next));
      },
      Math.max(0, Math.min(wait, MAX_WAIT_MS)),
    );
    timer.unref();
    this.timers.set(s.name, timer);
  }

  /** Fires an occurrence; a failure is logged (the next occurrence comes anyway). */
  private async fire(s: ScheduleDefinition, occurrence: string): Promise<void> {
    try {
      const fired = await this.firing.fire(s, occurrence);
      if ('skipped' in fired) {
        if (fired.skipped !== HANDLED_ALREADY) this.$.observe.emit('scheduleFired', s.name, 'skipped');
      } else if (!fired.replayed) this.$.observe.emit('scheduleFired', s.name, 'started');
    } catch (error) {
      if (firedElsewhere(error)) return;
      this.$.observe.emit('scheduleFired', s.name, 'refused');
      const why = error instanceof Refusal ? `${error.code}: ${error.message}` : String(error);
      this.$.logger.warn({ schedule: s.name, occurrence, error: why }, 'schedule occurrence not started');
    }
  }

  /** "Run now": starts its run at once, whatever its last run is doing. */
  runNow(name: string): Promise<Fired> {
    return this.firing.fire(this.require(name), new Date().toISOString(), true);
  }

  private require(name: string): ScheduleDefinition {
    const s = this.$.schedules.find((x) => x.name === name);
    if (!s) throw new Refusal('schedule_not_found', `No schedule "${name}".`);
    return s;
  }

  /** The daily limits of the schedules of these workspaces that have any (docs/queue-and-schedules.md: Daily limits). */
  dailyLimits(workspaceIds: string[]): Record<string, ScopeLimits> {
    return limitsOf(
      this.$.schedules.map((s) => ({ name: s.name, workspace: s.workspace, limits: s.limits })),
      workspaceIds,
    );
  }

  async list(): Promise<ScheduleView[]> {
    return Promise.all(this.$.schedules.map((s) => this.view(s)));
  }

  private async view(s: ScheduleDefinition): Promise<ScheduleView> {
    const state = await this.firing.state(s.name);
    const last = state?.lastTaskId === undefined ? undefined : await this.$.runs.find(state.lastTaskId);
    return {
      name: s.name,
      workspaceId: s.workspace,
      cron: s.cron,
      timezone: s.timezone ?? 'UTC',
      overlap: s.overlap ?? 'skip',
      missed: s.missed ?? 'skip',
      nextRunAt: cronOf(s).nextRun()?.toISOString() ?? null,
      lastOccurrence: state?.lastOccurrence ?? null,
      lastRun: last ? { taskId: last.taskId, status: last.status } : null,
    };
  }
}
