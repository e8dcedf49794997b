import { describe, expect, it } from 'vitest';
import { priced } from '../../src/core/agents/prices';
import { addUsage, usageOf } from '../../src/core/agents/parsing/json-lines';
import { MAX_REPORTED_COST_USD, boundedUsage, higherUsage } from '../../src/core/agents/reported-usage';

/** docs/security.md, What an agent reports: its usage cannot lower a limit. */
describe('reported usage', () => {
  it('a negative step cannot undo the earlier ones (opencode reports one per step)', () => {
    const total = addUsage(usageOf(1000, 100, 0.5), usageOf(-5000, -100, -0.5));
    expect(total).toEqual({ inputTokens: 1000, outputTokens: 100, costUsd: 0.5 });
  });

  it('a cost the agent prints as 1e999 (Infinity once parsed) is the ceiling, not "no cost"', () => {
    const line = JSON.parse('{"input":1,"output":1,"cost":1e999}') as { input: number; output: number; cost: number };
    expect(usageOf(line.input, line.output, line.cost)).toEqual({ inputTokens: 1, outputTokens: 1, costUsd: MAX_REPORTED_COST_USD });
  });

  it('NaN, Infinity, huge and fractional figures are bounded: whole token counts, a finite cost from 0', () => {
    expect(boundedUsage({ inputTokens: Number.NaN, outputTokens: 1.7, costUsd: Number.NaN })).toEqual({ inputTokens: 0, outputTokens: 1 });
    expect(boundedUsage({ inputTokens: Number.POSITIVE_INFINITY, outputTokens: -3, costUsd: Number.POSITIVE_INFINITY })).toEqual({
      inputTokens: Number.MAX_SAFE_INTEGER,
      outputTokens: 0,
      costUsd: MAX_REPORTED_COST_USD,
    });
    expect(boundedUsage({ inputTokens: 1, outputTokens: 1, costUsd: Number.NEGATIVE_INFINITY })).toEqual({ inputTokens: 1, outputTokens: 1, costUsd: 0 });
    expect(JSON.parse(JSON.stringify(boundedUsage({ inputTokens: 1e300, outputTokens: 0, costUsd: 1e300 })))).toEqual({
      inputTokens: Number.MAX_SAFE_INTEGER,
      outputTokens: 0,
      costUsd: MAX_REPORTED_COST_USD,
    });
  });

  it('priced bounds what it is given: a negative cost is 0, and negative tokens never make a negative estimate', () => {
    expect(priced({ inputTokens: 10, outputTokens: 10, costUsd: -100 }, undefined)).toEqual({ inputTokens: 10, outputTokens: 10, costUsd: 0 });
    const estimated = priced({ inputTokens: -1_000_000, outputTokens: 0 }, { inputPerMillionUsd: 1, outputPerMillionUsd: 1 });
    expect(estimated).toEqual({ inputTokens: 0, outputTokens: 0, costUsd: 0, costEstimated: true });
  });

  it("a run's usage only grows: a later, lower report keeps the higher figures", () => {
    const ran = { inputTokens: 3000, outputTokens: 300, costUsd: 0.03 };
    expect(higherUsage(ran, { inputTokens: 0, outputTokens: 0, costUsd: 0 })).toEqual(ran);
    expect(higherUsage(ran, { inputTokens: 10, outputTokens: 10 })).toEqual(ran);
    expect(higherUsage({ inputTokens: 1, outputTokens: 1 }, { inputTokens: 5, outputTokens: 5, costUsd: 0.2, costEstimated: true })).toEqual({
      inputTokens: 5,
      outputTokens: 5,
      costUsd: 0.2,
      costEstimated: true,
    });
  });
});
