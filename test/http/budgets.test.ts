import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { RunUsage } from '../../src/contract/records';
import type { AgentAdapter } from '../../src/core/agents/types';
import { claudeStandIn } from '../helpers/claude-stand-in';
import { closeAllHosts, createTestHost } from '../helpers/harness';

/** docs/http-api.md, Budgets: a run's limits, watched from its events, and passed to the CLIs that keep them. */

const dir = mkdtempSync(join(tmpdir(), 'hrw-budget-'));
const ARGV = join(dir, 'argv.jsonl');
afterEach(closeAllHosts);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const budgeted = claudeStandIn('budgeted');

/** The arguments the stand-in was last started with. */
const lastArgv = (): string[] => JSON.parse(readFileSync(ARGV, 'utf8').trim().split('\n').at(-1) as string);

async function run(body: Record<string, unknown>) {
  const host = await createTestHost({
    workspaces: [{ id: 'ws', path: dir, agents: ['budgeted'] }],
    agents: { budgeted },
    env: { ...process.env, BUDGET_ARGV: ARGV },
  });
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'budgeted', wait: true, ...body } });
  return (await res.json()) as Record<string, any>;
}

describe('budgets', () => {
  it('maxTurns: the tool call past it stops the run, failed, budget_exceeded; Claude Code is given --max-turns too', async () => {
    const body = await run({ prompt: '6 hold', maxTurns: 2 });
    expect(body).toMatchObject({
      status: 'failed',
      budget: { maxTurns: 2 },
      error: { code: 'budget_exceeded', message: 'Stopped: it started tool call 3, over its maxTurns of 2.' },
    });
    expect(lastArgv()).toEqual(expect.arrayContaining(['--max-turns', '2']));
  });

  it('maxTokens: usage reported as the run goes (each response once) stops it once it reaches the limit', async () => {
    const body = await run({ prompt: '6 hold', maxTokens: 3000 });
    expect(body).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exceeded', message: 'Stopped: it used 3300 tokens, reaching its maxTokens of 3000.' },
    });
  });

  it('maxCostUsd: passed to Claude Code as --max-budget-usd; its own stop at the limit is budget_exceeded too', async () => {
    const body = await run({ prompt: '1 stop-at-budget', maxCostUsd: 0.5 });
    expect(body).toMatchObject({ status: 'failed', budget: { maxCostUsd: 0.5 }, error: { code: 'budget_exceeded' } });
    expect(body.error.message).toMatch(/^The agent stopped at its maxCostUsd limit: /);
    expect(lastArgv()).toEqual(expect.arrayContaining(['--max-budget-usd', '0.5']));
  });

  it('within its budget a run succeeds, with its usage in the record', async () => {
    const body = await run({ prompt: '2', maxTurns: 5, maxTokens: 100_000, maxCostUsd: 1 });
    expect(body).toMatchObject({ status: 'succeeded', usage: { inputTokens: 2000, outputTokens: 200, costUsd: 0.02 } });
  });

  it('a budget that cannot work is 400 invalid_body', async () => {
    for (const bad of [{ maxTurns: 0 }, { maxTokens: 1.5 }, { maxCostUsd: -1 }, { maxCostUsd: 'x' }]) {
      const body = await run({ prompt: '1', ...bad });
      expect(body).toMatchObject({ code: 'invalid_body' });
    }
  });
});

describe('a cost estimated from token prices, for an agent that reports tokens only', () => {
  const stand = claudeStandIn('tokens');
  /** The stand-in's stream with its costs left out, as codex and gemini print theirs. */
  const tokensOnly: AgentAdapter = {
    ...stand,
    parser(input) {
      const inner = stand.parser(input);
      const strip = (u: RunUsage): RunUsage => ({ inputTokens: u.inputTokens, outputTokens: u.outputTokens });
      return {
        line: (l) => (inner.line(l) ?? []).map((e) => (e.type === 'usage' ? { ...e, usage: strip(e.usage) } : e)),
        sessionId: () => inner.sessionId(),
        finish(code) {
          const verdict = inner.finish(code);
          return verdict.usage ? { ...verdict, usage: strip(verdict.usage) } : verdict;
        },
      };
    },
  };
  const priced = (body: Record<string, unknown>) =>
    createTestHost({
      workspaces: [{ id: 'ws', path: dir, agents: ['tokens'] }],
      agents: { tokens: tokensOnly },
      prices: { tokens: { inputPerMillionUsd: 10, outputPerMillionUsd: 100 } },
    }).then(
      async (host) => (await host.request('POST', '/api/workspaces/ws/headless', { json: { wait: true, ...body } })).json() as Promise<Record<string, any>>,
    );

  it('the record shows the estimate, marked as one', async () => {
    // 2000 input tokens at $10 and 200 output tokens at $100 per million.
    expect(await priced({ prompt: '2' })).toMatchObject({
      status: 'succeeded',
      usage: { inputTokens: 2000, outputTokens: 200, costUsd: 0.04, costEstimated: true },
    });
  });

  it('maxCostUsd holds for it', async () => {
    const body = await priced({ prompt: '6 hold', maxCostUsd: 0.05 });
    expect(body).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exceeded', message: 'Stopped: it spent $0.0600, reaching its maxCostUsd of $0.05.' },
    });
  });
});
