import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RunSource } from '../../src/contract/records';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import type { TriggerDefinition } from '../../src/core/triggers/trigger-spec';
import type { RunUsage } from '../../src/contract/records';
import { sortableIdBound } from '../../src/core/util/ids';
import { claudeStandIn } from '../helpers/claude-stand-in';
import { closeAllHosts, createTestHost, fakeAgent, problem } from '../helpers/harness';
import { storedRun } from '../helpers/records';

/** docs/http-api.md, Usage: `GET /api/usage`, spend and tokens per UTC day from the run records. */

const DAY = 86_400_000;
/** Noon, UTC: the clock the service reads in this file, so no test straddles a midnight. */
const NOW = Date.UTC(2030, 5, 15, 12, 0, 0);
const TODAY = NOW - (NOW % DAY);

const dir = mkdtempSync(join(tmpdir(), 'hrw-usage-'));
beforeEach(() => {
  vi.setSystemTime(NOW);
});
afterEach(async () => {
  await closeAllHosts();
  vi.useRealTimers();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A run id made at `time`, as the service makes them (util/ids.ts). */
const idAt = (time: number, n: number) => `${sortableIdBound('run_', time)}${n.toString(36).padStart(4, '0')}${n.toString(16).padStart(16, '0')}`;

let n = 0;
function ended(time: number, more: { workspaceId?: string; agent?: string; source?: RunSource; usage?: RunUsage; status?: 'succeeded' | 'failed' }) {
  const taskId = idAt(time, ++n);
  const { status = 'succeeded', ...rest } = more;
  return storedRun(taskId, { createdAt: new Date(time).toISOString(), status, endedAt: new Date(time).toISOString(), durationMs: 1, exitCode: 0, ...rest });
}

const nightly = { kind: 'schedule', name: 'nightly', scheduledFor: new Date(TODAY).toISOString() } as const;
const alerts = { kind: 'trigger', name: 'alerts', delivery: 'dlv_1' } as const;

/** Runs with known usage: today, yesterday's last millisecond, the first and last of the day before. */
const SEEDED = [
  ended(TODAY, { agent: 'claude', usage: { inputTokens: 100, outputTokens: 10, costUsd: 0.1 } }),
  ended(TODAY + 1000, { agent: 'codex', source: nightly, usage: { inputTokens: 1000, outputTokens: 200, costUsd: 0.2, costEstimated: true } }),
  ended(TODAY + 2000, { agent: 'claude', source: alerts, usage: { inputTokens: 50, outputTokens: 5 } }),
  ended(TODAY + 3000, { agent: 'claude', source: alerts, status: 'failed' }),
  // Stored by an older version, or a lying agent: bounded as the daily limits bound it.
  ended(TODAY + 4000, { agent: 'claude', usage: { inputTokens: -3, outputTokens: 7, costUsd: -5 } }),
  ended(TODAY + 5000, { workspaceId: 'other', agent: 'fake', usage: { inputTokens: 10, outputTokens: 1, costUsd: 1 } }),
  ended(TODAY - 1, { agent: 'claude', usage: { inputTokens: 1, outputTokens: 1, costUsd: 0.5 } }),
  ended(TODAY - 2 * DAY, { agent: 'codex', usage: { inputTokens: 2, outputTokens: 2, costUsd: 2, costEstimated: true } }),
  ended(TODAY - 2 * DAY - 1, { agent: 'codex', usage: { inputTokens: 4, outputTokens: 4, costUsd: 4 } }),
];

const alertsTrigger: TriggerDefinition = {
  name: 'alerts',
  workspace: 'ws',
  sender: 'github',
  run: { agent: 'fake' },
  secret: 'a-github-webhook-secret',
  prompt: 'look',
  limits: { perMinute: 3, runsPerDay: 20, spendPerDayUsd: 5 },
};

async function seededHost() {
  const store = createMemoryKeyv();
  for (const run of SEEDED) await store.set(`run:${run.taskId}`, run);
  return createTestHost({
    store,
    workspaces: [
      { id: 'ws', path: dir, agents: ['fake', 'priced'], limits: { runsPerDay: 50, spendPerDayUsd: 10 } },
      { id: 'other', path: dir, agents: ['fake'] },
    ],
    agents: { fake: fakeAgent, priced: claudeStandIn('priced') },
    schedules: [{ name: 'nightly', cron: '0 3 * * *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'echo', limits: { runsPerDay: 1 } }],
    triggers: [alertsTrigger],
  });
}

const figures = (runs: number, inputTokens: number, outputTokens: number, costUsd: number, estimatedCostUsd = 0) => ({
  runs,
  inputTokens,
  outputTokens,
  costUsd,
  estimatedCostUsd,
});

describe('GET /api/usage', () => {
  it('sums each UTC day exactly, in total and by workspace, agent, schedule and trigger; the estimated part apart', async () => {
    const h = await seededHost();
    const res = await h.request('GET', '/api/usage?days=3');
    expect(res.status).toBe(200);
    const { days } = await res.json();
    expect(days.map((d: { day: string }) => d.day)).toEqual(['2030-06-15', '2030-06-14', '2030-06-13']);
    expect(days[0]).toEqual({
      day: '2030-06-15',
      // 0.1 + 0.2 + 1 summed as floats is 1.3000000000000003: the figures are to the millionth of a dollar.
      total: figures(6, 1160, 223, 1.3, 0.2),
      workspaces: { ws: figures(5, 1150, 222, 0.3, 0.2), other: figures(1, 10, 1, 1) },
      agents: { claude: figures(4, 150, 22, 0.1), codex: figures(1, 1000, 200, 0.2, 0.2), fake: figures(1, 10, 1, 1) },
      schedules: { nightly: figures(1, 1000, 200, 0.2, 0.2) },
      triggers: { alerts: figures(2, 50, 5, 0) },
    });
    // Costliest first, whatever order the runs were read in.
    expect(Object.keys(days[0].agents)).toEqual(['fake', 'codex', 'claude']);
    expect(Object.keys(days[0].workspaces)).toEqual(['other', 'ws']);
    // Its last millisecond is yesterday's; the day before starts at its first, and the millisecond before it is not asked.
    expect(days[1]).toMatchObject({ total: figures(1, 1, 1, 0.5), agents: { claude: figures(1, 1, 1, 0.5) } });
    expect(days[2]).toMatchObject({ total: figures(1, 2, 2, 2, 2), workspaces: { ws: figures(1, 2, 2, 2, 2) } });
    const four = await (await h.request('GET', '/api/usage?days=4')).json();
    expect(four.days[3]).toMatchObject({ day: '2030-06-12', total: figures(1, 4, 4, 4) });
  });

  it('days defaults to 7, each day present even without runs; workspaceId keeps one workspace', async () => {
    const h = await seededHost();
    const week = await (await h.request('GET', '/api/usage')).json();
    expect(week.days).toHaveLength(7);
    expect(week.days[6]).toEqual({ day: '2030-06-09', total: figures(0, 0, 0, 0), workspaces: {}, agents: {}, schedules: {}, triggers: {} });
    const other = await (await h.request('GET', '/api/usage?days=1&workspaceId=other')).json();
    expect(other.days).toEqual([
      {
        day: '2030-06-15',
        total: figures(1, 10, 1, 1),
        workspaces: { other: figures(1, 10, 1, 1) },
        agents: { fake: figures(1, 10, 1, 1) },
        schedules: {},
        triggers: {},
      },
    ]);
    expect(other.limits).toEqual({ workspaces: { other: {} }, schedules: {}, triggers: {} });
  });

  it('shows the daily limits in force: each workspace, and the schedules and triggers that have any (their other limits left out)', async () => {
    const h = await seededHost();
    const { limits } = await (await h.request('GET', '/api/usage?days=1')).json();
    expect(limits).toEqual({
      workspaces: { ws: { runsPerDay: 50, spendPerDayUsd: 10 }, other: {} },
      schedules: { nightly: { workspaceId: 'ws', runsPerDay: 1 } },
      triggers: { alerts: { workspaceId: 'ws', runsPerDay: 20, spendPerDayUsd: 5 } },
    });
  });

  it('counts runs that ended here with the usage their agent reported', async () => {
    const h = await seededHost();
    for (const prompt of ['3', '2']) {
      const done = await (await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'priced', prompt, wait: true } })).json();
      expect(done).toMatchObject({ status: 'succeeded', usage: { costUsd: Number(prompt) / 100 } });
    }
    const { days } = await (await h.request('GET', '/api/usage?days=1&workspaceId=ws')).json();
    expect(days[0].agents.priced).toMatchObject({ runs: 2, costUsd: 0.05, estimatedCostUsd: 0 });
    expect(days[0].agents.priced.inputTokens).toBeGreaterThan(0);
    expect(days[0].total).toMatchObject({ runs: 7, costUsd: 0.35 });
    // The same day, as the daily limits count it.
    expect(await (await h.request('GET', '/api/workspaces/ws/usage')).json()).toMatchObject({ runs: 7, spendUsd: 0.35 });
  });

  it.each([
    ['days=0'],
    ['days=91'],
    ['days=abc'],
    ['days=1.5'],
    ['days=07'],
    ['days=-1'],
    ['days=7&days=7'],
    ['workspaceId=..%2Fetc'],
    ['workspaceId='],
    ['day=7'],
  ])('refuses %s: 400 invalid_body, as problem JSON', async (query) => {
    const h = await seededHost();
    const p = await problem(await h.request('GET', `/api/usage?${query}`));
    expect(p).toMatchObject({ status: 400, code: 'invalid_body', contentType: 'application/problem+json' });
  });

  it('an unknown workspace is 404 workspace_not_found', async () => {
    const h = await seededHost();
    expect(await problem(await h.request('GET', '/api/usage?workspaceId=nope'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
  });
});
