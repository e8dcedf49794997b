import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type AgentAdapter, createCommandAgent, createSqliteKeyv } from '../../src/core/index';
import { keyvStore } from '../../src/core/store/keyv-store';
import { FAKE_AGENT, type TestHost, closeAllHosts, createTestHost, fakeAgent, problem } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/**
 * Schedules (docs/queue-and-schedules.md), with six-field cron expressions that fire every second
 * or two; every wait is for a state, with a generous bound, never for a moment.
 */

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'hrw-sched-'));
  dirs.push(d);
  return d;
}

type Json = Record<string, any>;
const runsOf = async (host: TestHost, name: string): Promise<Json[]> =>
  ((await (await host.request('GET', `/api/headless?wsId=ws&schedule=${name}&limit=100`)).json()) as { runs: Json[] }).runs;
const schedule = (extra: Json) => ({
  name: 'tick',
  cron: '* * * * * *',
  workspace: 'ws',
  prompt: 'echo tick',
  ...extra,
  run: { agent: 'fake', ...(extra.run as Json) },
});

describe('schedules', () => {
  it('fire their runs, which carry the schedule and its occurrence; the list filters by it; GET /api/schedules shows the next and the last', async () => {
    const host = await createTestHost({ schedules: [schedule({ run: { title: 'every second', metadata: { source: 'cron' } } })] });
    await waitFor(async () => (await runsOf(host, 'tick')).length >= 2, { timeoutMs: 240_000, what: 'two firings' });
    const runs = await runsOf(host, 'tick');
    expect(runs[0]).toMatchObject({ schedule: 'tick', title: 'every second', metadata: { source: 'cron' } });
    expect(new Set(runs.map((r) => r.scheduledFor)).size).toBe(runs.length);
    for (const r of runs) expect(new Date(r.scheduledFor).getUTCMilliseconds()).toBe(0);
    expect((await runsOf(host, 'other')).length).toBe(0);
    const list = (await (await host.request('GET', '/api/schedules')).json()) as { schedules: Json[] };
    expect(list.schedules).toEqual([
      expect.objectContaining({ name: 'tick', workspaceId: 'ws', timezone: 'UTC', overlap: 'skip', missed: 'skip', nextRunAt: expect.any(String) }),
    ]);
    expect(list.schedules[0]!.lastRun).toMatchObject({ taskId: expect.stringMatching(/^run_/) });
    expect(await (await host.request('GET', '/metrics')).text()).toMatch(/^headless_schedule_firings_total\{schedule="tick",outcome="started"\} [1-9]/m);
  });

  it('overlap skip: while its last run goes on, occurrences start nothing; then the next one does', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ schedules: [schedule({ prompt: `wait-file ${gate}; echo held` })] });
    await waitFor(async () => (await runsOf(host, 'tick')).length === 1, { timeoutMs: 240_000, what: 'the first firing' });
    const first = (await runsOf(host, 'tick'))[0]!;
    // Occurrences pass while it runs: the schedule's last occurrence moves on, no run is added.
    const later = async () => ((await (await host.request('GET', '/api/schedules')).json()) as { schedules: Json[] }).schedules[0]!.lastOccurrence;
    await waitFor(async () => (await later()) > first.scheduledFor, { timeoutMs: 240_000, what: 'a skipped occurrence' });
    expect((await runsOf(host, 'tick')).length).toBe(1);
    writeFileSync(gate, '');
    await waitFor(async () => (await runsOf(host, 'tick')).length >= 2, { timeoutMs: 240_000, what: 'a firing after the end' });
  });

  it('overlap queue: the next occurrence waits in the queue behind the run still going, then starts', async () => {
    const gate = join(scratch(), 'go');
    const host = await createTestHost({ schedules: [schedule({ prompt: `wait-file ${gate}; echo held`, overlap: 'queue' })] });
    await waitFor(async () => (await runsOf(host, 'tick')).some((r) => r.status === 'queued'), { timeoutMs: 240_000, what: 'a queued occurrence' });
    const runs = await runsOf(host, 'tick');
    expect(runs.filter((r) => r.status === 'running')).toHaveLength(1);
    writeFileSync(gate, '');
    const queued = runs.find((r) => r.status === 'queued')!;
    expect((await host.waitEnded(queued.taskId, 60_000)).status).toBe('succeeded');
  });

  it('run now: 202 with the run, whatever its last run does; an unknown schedule is 404', async () => {
    const host = await createTestHost({ schedules: [schedule({ cron: '0 0 1 1 *' })] });
    const res = await host.request('POST', '/api/schedules/tick/run');
    expect(res.status).toBe(202);
    const started = (await res.json()) as Json;
    expect(res.headers.get('location')).toBe(`/api/headless/${started.taskId}`);
    expect(await host.waitEnded(started.taskId)).toMatchObject({ status: 'succeeded', schedule: 'tick' });
    expect(await problem(await host.request('POST', '/api/schedules/nope/run'))).toMatchObject({ status: 404, code: 'schedule_not_found' });
  });

  it('a schedule’s permissions reach its runs, through the queue too; the workspace’s own runs keep the workspace’s', async () => {
    const gate = join(scratch(), 'go');
    // The fake agent with a read-only mode: it prints the permissions it was started with.
    const careful: AgentAdapter = {
      ...createCommandAgent('fake', fakeAgent),
      readOnly: true,
      invocation: (input) => ({ command: process.execPath, args: [FAKE_AGENT, `echo permissions=${input.permissions}; ${input.prompt}`] }),
    };
    const host = await createTestHost({
      agents: { fake: careful },
      schedules: [schedule({ prompt: `wait-file ${gate}`, overlap: 'queue', run: { permissions: 'read-only' } })],
    });
    await waitFor(async () => (await runsOf(host, 'tick')).some((r) => r.status === 'queued'), { timeoutMs: 240_000, what: 'a queued occurrence' });
    const own = (await (await host.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo own', wait: true } })).json()) as Json;
    expect(own.policy).toBeUndefined();
    expect(own.output.stdout).toContain('permissions=full');
    writeFileSync(gate, '');
    const queued = (await runsOf(host, 'tick')).find((r) => r.status === 'queued')!;
    const ended = await host.waitEnded(queued.taskId, 60_000);
    expect(ended).toMatchObject({ status: 'succeeded', policy: { permissions: 'read-only', sandbox: false } });
    const output = (await (await host.request('GET', `/api/headless/${queued.taskId}/output`)).json()) as Json;
    expect(output.stdout).toContain('permissions=read-only');
  });

  it('bad schedules are refused when the handler is made, naming the schedule', async () => {
    await expect(createTestHost({ schedules: [schedule({ cron: 'every day' })] })).rejects.toThrow(/schedule "tick"/);
    await expect(createTestHost({ schedules: [schedule({ timezone: 'Mars/Olympus' })] })).rejects.toThrow(/schedule "tick"/);
    await expect(createTestHost({ schedules: [schedule({ workspace: 'nowhere' })] })).rejects.toThrow(/no workspace "nowhere"/);
    await expect(createTestHost({ schedules: [schedule({}), schedule({})] })).rejects.toThrow(/defined twice/);
  });
});

describe('missed occurrences', () => {
  /** A store where the daily schedule last handled an occurrence two days ago (the service was down since). */
  async function downTwoDays(missed: 'skip' | 'once') {
    const data = scratch();
    const store = keyvStore(await createSqliteKeyv(data));
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    twoDaysAgo.setUTCHours(3, 0, 0, 0);
    await store.set('schedule:daily', { lastOccurrence: twoDaysAgo.toISOString() });
    await store.close();
    return createTestHost({ store: await createSqliteKeyv(data), schedules: [schedule({ name: 'daily', cron: '0 3 * * *', missed })] });
  }

  it('once: the latest missed occurrence runs once at start-up', async () => {
    const host = await downTwoDays('once');
    await waitFor(async () => (await runsOf(host, 'daily')).length === 1, { timeoutMs: 240_000, what: 'the missed run' });
    const [run] = await runsOf(host, 'daily');
    const latest = new Date();
    if (latest.getUTCHours() < 3) latest.setUTCDate(latest.getUTCDate() - 1);
    latest.setUTCHours(3, 0, 0, 0);
    expect(run!.scheduledFor).toBe(latest.toISOString());
  });

  it('skip: nothing runs for the occurrences missed', async () => {
    const host = await downTwoDays('skip');
    // Its start-up is done once the handler is ready; the schedule state says what it handled.
    const view = ((await (await host.request('GET', '/api/schedules')).json()) as { schedules: Json[] }).schedules[0]!;
    expect(view.lastRun).toBeNull();
    expect(await runsOf(host, 'daily')).toEqual([]);
  });
});
