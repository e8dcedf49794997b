/**
 * @module Runs per day and spend per day (docs/queue-and-schedules.md: Daily limits), for a
 * workspace and for a schedule or trigger in it: read from the day's run records (a UTC day), so
 * they hold across restarts and across a fleet sharing a store, and checked at admission. A start
 * over a limit is refused until the next UTC midnight; it is never held.
 */
import type { DailyLimits } from '../types';
import { costUsd } from '../agents/reported-usage';
import { sourceOf } from '../public-record';
import type { RunRecords } from './records';
import { DAY_MS, dayName, dayStart, runsSince } from './runs-since';

export interface DayUsage {
  runs: number;
  spendUsd: number;
}

/** What one scope used today, with its limits. */
export interface ScopeUsage extends DayUsage {
  limits: DailyLimits;
}

/** A workspace's day: its own runs and spend, and each schedule's and trigger's in it. */
export interface WorkspaceDay extends ScopeUsage {
  workspaceId: string;
  /** The UTC day, `YYYY-MM-DD`. */
  day: string;
  schedules: Record<string, DayUsage>;
  triggers: Record<string, DayUsage>;
}

/** A schedule's or trigger's daily limits, and its workspace. */
export interface ScopeLimits extends DailyLimits {
  workspaceId: string;
}

/** Each named scope of these workspaces that has a daily limit, by name, with its limits only. */
export function limitsOf(scopes: Array<{ name: string; workspace: string; limits?: DailyLimits }>, workspaceIds: string[]): Record<string, ScopeLimits> {
  const limited: Record<string, ScopeLimits> = {};
  for (const { name, workspace, limits } of scopes) {
    if (!workspaceIds.includes(workspace) || (limits?.runsPerDay === undefined && limits?.spendPerDayUsd === undefined)) continue;
    const { runsPerDay, spendPerDayUsd } = limits;
    limited[name] = {
      workspaceId: workspace,
      ...(runsPerDay === undefined ? {} : { runsPerDay }),
      ...(spendPerDayUsd === undefined ? {} : { spendPerDayUsd }),
    };
  }
  return limited;
}

/** A limit a start would pass: which, and when the next day starts. */
export interface DailyRefusal {
  detail: string;
  retryAfterSeconds: number;
}

/** Throws, naming where, on daily limits that cannot work. */
export function checkDailyLimits(limits: DailyLimits | undefined, where: string): void {
  if (limits?.runsPerDay !== undefined && !(Number.isInteger(limits.runsPerDay) && limits.runsPerDay >= 1))
    throw new Error(`${where}: runsPerDay must be a whole number, 1 or more`);
  if (limits?.spendPerDayUsd !== undefined && !(Number.isFinite(limits.spendPerDayUsd) && limits.spendPerDayUsd > 0))
    throw new Error(`${where}: spendPerDayUsd must be a positive number`);
}

export class DailyUsage {
  constructor(private readonly $: { records: RunRecords }) {}

  /** What a workspace, and each of its schedules and triggers, used today. */
  async day(workspaceId: string, limits: DailyLimits = {}, now = Date.now()): Promise<WorkspaceDay> {
    const usage: WorkspaceDay = {
      workspaceId,
      day: dayName(dayStart(now)),
      runs: 0,
      spendUsd: 0,
      limits,
      schedules: {},
      triggers: {},
    };
    // Read from the store: a decision (a start's admission) rests on it.
    for await (const run of runsSince(this.$.records, workspaceId, dayStart(now), { stored: true })) {
      // Bounded again: a record stored by an older version (or another instance) may hold a negative cost.
      const cost = costUsd(run.usage?.costUsd) ?? 0;
      usage.runs += 1;
      usage.spendUsd += cost;
      const source = sourceOf(run);
      if (source.kind === 'api') continue;
      const of = source.kind === 'schedule' ? usage.schedules : usage.triggers;
      const one = of[source.name] ?? { runs: 0, spendUsd: 0 };
      of[source.name] = { runs: one.runs + 1, spendUsd: one.spendUsd + cost };
    }
    return usage;
  }

  /** Why a start in this workspace (from this schedule or trigger) would pass a daily limit, or undefined. */
  async refusal(a: {
    workspaceId: string;
    workspace?: DailyLimits;
    origin?: { kind: 'schedule' | 'trigger'; name: string; limits?: DailyLimits };
  }): Promise<DailyRefusal | undefined> {
    const limited = (l: DailyLimits | undefined) => l?.runsPerDay !== undefined || l?.spendPerDayUsd !== undefined;
    if (!limited(a.workspace) && !limited(a.origin?.limits)) return undefined;
    const now = Date.now();
    const day = await this.day(a.workspaceId, a.workspace, now);
    const retryAfterSeconds = Math.ceil((dayStart(now) + DAY_MS - now) / 1000);
    const over = passed(`workspace "${a.workspaceId}"`, day, a.workspace);
    if (over) return { detail: over, retryAfterSeconds };
    if (!a.origin) return undefined;
    const used = (a.origin.kind === 'schedule' ? day.schedules : day.triggers)[a.origin.name] ?? { runs: 0, spendUsd: 0 };
    const overOrigin = passed(`${a.origin.kind} "${a.origin.name}"`, used, a.origin.limits);
    return overOrigin ? { detail: overOrigin, retryAfterSeconds } : undefined;
  }
}

/** The limit `used` has reached, said plainly, or undefined. */
function passed(who: string, used: DayUsage, limits: DailyLimits | undefined): string | undefined {
  const runs = limits?.runsPerDay;
  if (runs !== undefined && used.runs >= runs) return `${who} has reached its limit of ${runs} run${runs === 1 ? '' : 's'} a day (UTC)`;
  if (limits?.spendPerDayUsd !== undefined && used.spendUsd >= limits.spendPerDayUsd) {
    return `${who} has spent $${used.spendUsd.toFixed(2)} today (UTC), reaching its limit of $${limits.spendPerDayUsd} a day`;
  }
  return undefined;
}
