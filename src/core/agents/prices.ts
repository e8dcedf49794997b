/**
 * @module What tokens cost, for the agents whose CLI reports tokens but no cost (codex, gemini):
 * their runs' cost is estimated from these, so a `maxCostUsd` budget and a daily spend limit
 * hold for them too (docs/http-api.md: Budgets). The one place prices are kept; an operator's
 * `prices` (another model, their own provider) win.
 */
import type { RunUsage } from '../../contract/records';
import { boundedUsage } from './reported-usage';

/** US dollars per million tokens. */
export interface TokenPrice {
  inputPerMillionUsd: number;
  outputPerMillionUsd: number;
}

/**
 * The list prices of the model each CLI uses by default, checked 2026-11-26: codex, OpenAI's
 * gpt-5-codex; gemini, Google's gemini-2.5-pro (prompts up to 200k tokens).
 */
export const DEFAULT_PRICES: Readonly<Record<string, TokenPrice>> = {
  codex: { inputPerMillionUsd: 1.25, outputPerMillionUsd: 10 },
  gemini: { inputPerMillionUsd: 1.25, outputPerMillionUsd: 10 },
};

/** Throws, naming where, on prices that cannot work. */
export function checkPrices(prices: Record<string, TokenPrice> | undefined, where: string): void {
  for (const [agent, price] of Object.entries(prices ?? {})) {
    for (const key of ['inputPerMillionUsd', 'outputPerMillionUsd'] as const) {
      const value = price?.[key];
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new Error(`${where}prices.${agent}.${key} must be a number, 0 or more`);
    }
  }
}

/** The usage, bounded (an agent's report is input), with its cost estimated from the price where the agent reported none. */
export function priced(reported: RunUsage, price: TokenPrice | undefined): RunUsage {
  const usage = boundedUsage(reported);
  if (usage.costUsd !== undefined || price === undefined) return usage;
  const cost = (usage.inputTokens * price.inputPerMillionUsd + usage.outputTokens * price.outputPerMillionUsd) / 1_000_000;
  return { ...usage, costUsd: Math.round(cost * 1e6) / 1e6, costEstimated: true };
}
