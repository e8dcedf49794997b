/**
 * @module What an agent reports of its usage is input (docs/security.md: What an agent reports):
 * a negative cost would erase a day's spend, a run's `maxCostUsd` and `maxTokens`. Every figure
 * is bounded here before a guard, a record or a daily sum reads it, and a run's usage never goes
 * down: a later, lower report cannot undo an earlier one.
 */
import type { RunUsage } from '../../contract/records';

/** The most a single run is taken to have cost: a finite ceiling, so an absurd report stays JSON and a sum stays a number. */
export const MAX_REPORTED_COST_USD = 1_000_000_000;

/** A token count: a whole number from 0 to the largest exact integer; anything else (NaN, a string) is 0. */
export function tokenCount(value: unknown): number {
  if (typeof value !== 'number' || Number.isNaN(value) || value <= 0) return 0;
  return Math.min(Math.floor(value), Number.MAX_SAFE_INTEGER);
}

/** A cost in US dollars: from 0 to the ceiling (Infinity is the ceiling); undefined where it is not a number. */
export function costUsd(value: unknown): number | undefined {
  if (typeof value !== 'number' || Number.isNaN(value)) return undefined;
  return Math.min(Math.max(value, 0), MAX_REPORTED_COST_USD);
}

/** The usage with every figure bounded: what the service works with. */
export function boundedUsage(usage: RunUsage): RunUsage {
  const cost = costUsd(usage.costUsd);
  return {
    inputTokens: tokenCount(usage.inputTokens),
    outputTokens: tokenCount(usage.outputTokens),
    ...(cost === undefined ? {} : { costUsd: cost }),
    ...(cost !== undefined && usage.costEstimated ? { costEstimated: true } : {}),
  };
}

/** The run's usage after a new report: each figure the higher of the two, since a run's usage only grows. */
export function higherUsage(before: RunUsage | undefined, now: RunUsage): RunUsage {
  if (!before) return now;
  const cost = before.costUsd === undefined ? now.costUsd : Math.max(before.costUsd, now.costUsd ?? 0);
  const estimated = cost !== undefined && (cost === now.costUsd ? now.costEstimated : before.costEstimated);
  return {
    inputTokens: Math.max(before.inputTokens, now.inputTokens),
    outputTokens: Math.max(before.outputTokens, now.outputTokens),
    ...(cost === undefined ? {} : { costUsd: cost }),
    ...(estimated ? { costEstimated: true } : {}),
  };
}
