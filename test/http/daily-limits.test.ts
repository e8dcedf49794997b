import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { claudeStandIn } from '../helpers/claude-stand-in';
import type { ScheduleDefinition } from '../../src/core/schedules/schedule-spec';
import type { DailyLimits } from '../../src/core/types';
import { closeAllHosts, createTestHost, fakeAgent } from '../helpers/harness';

/** docs/queue-and-schedules.md, Daily limits: runs and spend per UTC day, per workspace, schedule and trigger. */

const dir = mkdtempSync(join(tmpdir(), 'hrw-daily-'));
afterEach(closeAllHosts);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A run of prompt "N" reports N × $0.01. */
const priced = claudeStandIn('priced');

function host(limits: DailyLimits | undefined, schedules: ScheduleDefinition[] = []) {
  return createTestHost({
    workspaces: [{ id: 'ws', path: dir, agents: ['priced', 'fake'], ...(limits ? { limits } : {}) }],
    agents: { priced, fake: fakeAgent },
    schedules,
  });
}

describe('daily limits', () => {
  it('runsPerDay: the start past it is 429 daily_limit_reached, with Retry-After until midnight UTC; the usage route counts it', async () => {
    const h = await host({ runsPerDay: 2 });
    for (let i = 0; i < 2; i++) {
      const ok = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo hi', wait: true } });
      expect(ok.status).toBe(200);
    }
    const refused = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo hi' } });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    const untilMidnight = (86_400_000 - (Date.now() % 86_400_000)) / 1000;
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(untilMidnight) + 1);
    expect(await refused.json()).toMatchObject({
      code: 'daily_limit_reached',
      detail: 'workspace "ws" has reached its limit of 2 runs a day (UTC); it starts again at 00:00 UTC.',
    });
    const usage = await (await h.request('GET', '/api/workspaces/ws/usage')).json();
    expect(usage).toMatchObject({ workspaceId: 'ws', day: new Date().toISOString().slice(0, 10), runs: 2, spendUsd: 0, limits: { runsPerDay: 2 } });
  });

  it('starts at once never both take the last run of the day', async () => {
    const h = await host({ runsPerDay: 3 });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo hi' } })),
    );
    expect(answers.filter((a) => a.status === 202)).toHaveLength(3);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(5);
  });

  it("spendPerDayUsd: the ended runs' reported cost; a start once it is reached is refused", async () => {
    const h = await host({ spendPerDayUsd: 0.05 });
    const first = await (await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt: '3', wait: true } })).json();
    expect(first).toMatchObject({ status: 'succeeded', usage: { costUsd: 0.03 } });
    const second = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt: '2', wait: true } });
    expect(second.status).toBe(200);
    const third = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt: '1' } });
    expect(third.status).toBe(429);
    expect(await third.json()).toMatchObject({
      code: 'daily_limit_reached',
      detail: expect.stringContaining('has spent $0.05 today (UTC), reaching its limit of $0.05 a day'),
    });
    const metrics = await (await h.request('GET', '/metrics')).text();
    expect(metrics).toContain('headless_spend_today_usd{workspace="ws"} 0.05');
    expect(metrics).toContain('headless_runs_today{workspace="ws"} 2');
  });

  it("a run whose agent reports a negative cost (or NaN, Infinity) counts 0, never less: the day's spend still reaches its limit", async () => {
    const h = await host({ spendPerDayUsd: 0.05 });
    const start = (prompt: string) => h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt, wait: true } });
    expect(await (await start('3')).json()).toMatchObject({ usage: { costUsd: 0.03 } });
    const liar = await (await start('1 lie -1000')).json();
    // Its tokens are what it reported as it ran; its cost is bounded at 0.
    expect(liar).toMatchObject({ status: 'succeeded', usage: { inputTokens: 1000, outputTokens: 100, costUsd: 0 } });
    expect(await (await start('1 lie NaN')).json()).toMatchObject({ status: 'succeeded' });
    const usage = await (await h.request('GET', '/api/workspaces/ws/usage')).json();
    expect(usage).toMatchObject({ runs: 3, spendUsd: 0.03 });
    expect((await start('2')).status).toBe(200);
    const refused = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt: '1' } });
    expect(refused.status).toBe(429);
  });

  it("a schedule's own limit skips its occurrences past it, while the workspace's other starts go on", async () => {
    const schedule: ScheduleDefinition = {
      name: 'nightly',
      cron: '0 3 * * *',
      workspace: 'ws',
      run: { agent: 'fake' },
      prompt: 'echo scheduled',
      limits: { runsPerDay: 1 },
    };
    const h = await host(undefined, [schedule]);
    expect((await h.request('POST', '/api/schedules/nightly/run')).status).toBe(202);
    const again = await h.request('POST', '/api/schedules/nightly/run');
    expect(again.status).toBe(429);
    expect(await again.json()).toMatchObject({
      code: 'daily_limit_reached',
      detail: 'schedule "nightly" has reached its limit of 1 run a day (UTC); it starts again at 00:00 UTC.',
    });
    expect((await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo hi' } })).status).toBe(202);
    const usage = await (await h.request('GET', '/api/workspaces/ws/usage')).json();
    expect(usage).toMatchObject({ runs: 2, schedules: { nightly: { runs: 1, spendUsd: 0 } } });
  });

  it('refuses limits that cannot work', async () => {
    await expect(host({ runsPerDay: 0 })).rejects.toThrow('workspace "ws": limits: runsPerDay must be a whole number, 1 or more');
    await expect(host({ spendPerDayUsd: -1 })).rejects.toThrow('spendPerDayUsd must be a positive number');
  });
});
