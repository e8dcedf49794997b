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

function rounded(day: UsageDay): UsageDay {
  const fix = (f: UsageFigures) => Object.assign(f, { costUsd: micro(f.costUsd), estimatedCostUsd: micro(f.estimatedCostUsd) });
  fix(day.total);
  for (const of of [day.workspaces, day.agents, day.schedules, day.triggers]) for (const f of Object.values(of)) fix(f);
  return day;
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
  return result.map(rounded);
}
