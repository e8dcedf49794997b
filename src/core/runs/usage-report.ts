/**
 * @module Spend and tokens per UTC day (docs/http-api.md: Usage), from the run records: each day's
 * totals, and the same by workspace, agent, schedule and trigger. A run counts on the day it was
 * accepted, as the daily limits count it (runs/daily-limits.ts), with its usage as recorded.
 */
import { costUsd, tokenCount } from '../agents/reported-usage';
import { sourceOf } from '../public-record';
import type { StoredRun } from '../types';
import type { RunRecords } from './records';
import { DAY_MS, dayName, dayStart, runBound, runsSince } from './runs-since';

/** What some runs used; `estimatedCostUsd` is the part of `costUsd` estimated from token counts, not reported by the agent. */
export interface UsageFigures {
  runs: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  estimatedCostUsd: number;
}

export interface UsageDay {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  total: UsageFigures;
  workspaces: Record<string, UsageFigures>;
  agents: Record<string, UsageFigures>;
  schedules: Record<string, UsageFigures>;
  triggers: Record<string, UsageFigures>;
}

const none = (): UsageFigures => ({ runs: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, estimatedCostUsd: 0 });

/** Adds one run's usage (bounded again: a record stored by an older version may hold a negative cost). */
function add(to: UsageFigures, run: StoredRun): void {
  const cost = costUsd(run.usage?.costUsd) ?? 0;
  to.runs += 1;
  to.inputTokens += tokenCount(run.usage?.inputTokens);
  to.outputTokens += tokenCount(run.usage?.outputTokens);
  to.costUsd += cost;
  if (run.usage?.costEstimated) to.estimatedCostUsd += cost;
}

function count(day: UsageDay, run: StoredRun): void {
  const into = (of: Record<string, UsageFigures>, key: string) => {
    of[key] ??= none();
    add(of[key], run);
  };
  add(day.total, run);
  into(day.workspaces, run.workspaceId);
  into(day.agents, run.agent);
  const source = sourceOf(run);
  if (source.kind === 'schedule') into(day.schedules, source.name);
  if (source.kind === 'trigger') into(day.triggers, source.name);
}

/** Sums of floating-point costs, to the millionth of a dollar: the same figures whatever the order they were added in. */
const micro = (usd: number) => Math.round(usd * 1e6) / 1e6;

/** Costliest first (then most runs, then by name): the same order whatever order the runs were read in. */
function ordered(of: Record<string, UsageFigures>): Record<string, UsageFigures> {
  const fixed = Object.entries(of).map(([name, f]): [string, UsageFigures] => [
    name,
    { ...f, costUsd: micro(f.costUsd), estimatedCostUsd: micro(f.estimatedCostUsd) },
  ]);
  fixed.sort(([a, x], [b, y]) => y.costUsd - x.costUsd || y.runs - x.runs || (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(fixed);
}

function finished(day: UsageDay): UsageDay {
  const total = { ...day.total, costUsd: micro(day.total.costUsd), estimatedCostUsd: micro(day.total.estimatedCostUsd) };
  return {
    day: day.day,
    total,
    workspaces: ordered(day.workspaces),
    agents: ordered(day.agents),
    schedules: ordered(day.schedules),
    triggers: ordered(day.triggers),
  };
}

/** The last `days` UTC days (today the first), each with its totals and breakdowns over the runs of `workspaceIds`. */
export async function usageByDay(records: RunRecords, workspaceIds: string[], days: number, now = Date.now()): Promise<UsageDay[]> {
  const starts = Array.from({ length: days }, (_, i) => dayStart(now) - i * DAY_MS);
  const bounds = starts.map(runBound);
  const result = starts.map((start): UsageDay => ({ day: dayName(start), total: none(), workspaces: {}, agents: {}, schedules: {}, triggers: {} }));
  const oldest = starts.at(-1) ?? dayStart(now);
  for (const workspaceId of workspaceIds) {
    // Newest first: a run belongs to the newest day whose first id it is not before.
    let i = 0;
    for await (const run of runsSince(records, workspaceId, oldest)) {
      while (i < bounds.length - 1 && run.taskId < (bounds[i] ?? '')) i++;
      const day = result[i];
      if (day) count(day, run);
    }
  }
  return result.map(finished);
}
