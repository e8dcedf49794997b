import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeadlessError, type HeadlessClient, createClient } from '../../src/client/index';
import { join } from 'node:path';
import { type Daemon, cleanupDaemons, startDaemon, startFakeDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { seedUsage } from '../helpers/usage-runs';

/** The typed client against the real daemon. */

const dirs: string[] = [];
let daemon: Daemon;
let client: HeadlessClient;

beforeAll(async () => {
  daemon = await startFakeDaemon(dirs);
  client = createClient({ url: daemon.url });
});
afterAll(async () => {
  await daemon.stop();
  cleanupDaemons(dirs);
});

const fake = (prompt: string) => ({ prompt, agent: 'fake' });

describe('the typed client', () => {
  it('start, then wait on the event stream for the final record; events() yields the timeline', async () => {
    const started = await client.start('ws', fake('session c1; sleep 200; echo done'));
    expect(started).toMatchObject({ status: 'running', taskId: expect.stringMatching(/^run_/) });
    const seen: string[] = [];
    const record = await client.wait(started.taskId, { onEvent: (e) => seen.push(e.type) });
    expect(record).toMatchObject({ taskId: started.taskId, status: 'succeeded', exitCode: 0 });
    expect(seen).toEqual(['run.started', 'agent.session', 'run.ended']);
    const events = [];
    for await (const e of client.events(started.taskId, { after: 1 })) events.push(e.seq);
    expect(events).toEqual([2, 3]);
  });

  it('a sync start answers the final record with its output', async () => {
    const result = await client.start('ws', { ...fake('echo hello'), wait: true });
    expect(result).toMatchObject({ status: 'succeeded', output: { stdout: 'hello\n' } });
  });

  it('list() walks every page, newest first', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await client.start('ws', { ...fake('echo x'), wait: true })).taskId);
    const listed: string[] = [];
    for await (const run of client.list('ws', { pageSize: 2 })) listed.push(run.taskId);
    expect(listed.slice(0, 5)).toEqual([...ids].reverse());
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('cancel(), then the record says cancelled', async () => {
    const { taskId } = await client.start('ws', fake('sleep 30000'));
    expect((await client.cancel(taskId)).taskId).toBe(taskId);
    expect((await client.wait(taskId)).status).toBe('cancelled');
  });

  it('errors are HeadlessError, typed by problem code', async () => {
    const missing = await client.get('run_nope').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(HeadlessError);
    expect(missing).toMatchObject({ status: 404, code: 'run_not_found' });
    await expect(client.start('ws', fake('   '))).rejects.toMatchObject({ status: 400, code: 'prompt_required' });
    await expect(client.start('nope', fake('echo x'))).rejects.toMatchObject({ status: 404, code: 'workspace_not_found' });
    await expect(createClient({ url: daemon.url, token: 'wrong' }).get('run_x')).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    await expect(createClient({ url: 'http://127.0.0.1:9' }).get('run_x')).rejects.toMatchObject({ code: 'network' });
  });

  it('retries a start whose answer was lost, with the same Idempotency-Key: one run', async () => {
    let calls = 0;
    const keys: string[] = [];
    const flaky: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith('/headless') && init?.method === 'POST') {
        keys.push(new Headers(init.headers).get('idempotency-key')!);
        // The first answer is lost on the way back.
        if (calls++ === 0) throw new TypeError('fetch failed');
      }
      return res;
    };
    const retrying = createClient({ url: daemon.url, fetch: flaky });
    const before = (await client.listPage('ws', { limit: 500 })).runs.length;
    const started = await retrying.start('ws', fake('echo once'));
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
    expect((await client.listPage('ws', { limit: 500 })).runs.length).toBe(before + 1);
    expect((await client.wait(started.taskId)).status).toBe('succeeded');
  });

  it('wait() falls back to polling when the event stream cannot be had', async () => {
    const noStreams: typeof fetch = async (input, init) => {
      if (String(input).includes('/events')) throw new TypeError('fetch failed');
      return fetch(input, init);
    };
    const polling = createClient({ url: daemon.url, fetch: noStreams });
    const { taskId } = await polling.start('ws', fake('sleep 300'));
    expect((await polling.wait(taskId, { pollMs: 50 })).status).toBe('succeeded');
  });

  it('the Inbox and Sessions', async () => {
    const item = await client.inbox.push('ws', { title: 'Report', body: 'all good' });
    expect(item).toMatchObject({ title: 'Report', body: 'all good', readAt: null });
    const unread = [];
    for await (const i of client.inbox.list('ws', { unread: true })) unread.push(i.id);
    expect(unread).toContain(item.id);
    expect((await client.inbox.markRead('ws', item.id)).readAt).not.toBeNull();
    const { resumeId, taskId } = await client.start('ws', fake('session s9; echo x'));
    await client.wait(taskId);
    expect(await client.sessions.get(resumeId)).toMatchObject({ resumeId, status: 'idle', resumable: true });
    expect((await client.sessions.retire(resumeId)).status).toBe('retired');
  });
});

describe('schedules and the queue through the client', () => {
  it('lists the schedules, runs one now, and a start at capacity comes back queued with its place', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      maxConcurrentRuns: 1,
      queue: {},
      schedules: [{ name: 'yearly', cron: '0 0 1 1 *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'wait-file never; echo x' }],
    });
    const d = await startDaemon(dir);
    const c = createClient({ url: d.url });
    expect((await c.schedules.list()).schedules).toEqual([expect.objectContaining({ name: 'yearly', nextRunAt: expect.stringMatching(/-01-01T00:00:00/) })]);
    const now = await c.schedules.run('yearly');
    expect(now).toMatchObject({ status: 'running' });
    expect(await c.get(now.taskId)).toMatchObject({ schedule: 'yearly', scheduledFor: expect.any(String) });
    const queued = await c.start('ws', fake('echo behind'));
    expect(queued).toMatchObject({ status: 'queued', queuePosition: 1 });
    await expect(c.schedules.run('nope')).rejects.toMatchObject({ code: 'schedule_not_found' });
    await c.cancel(now.taskId);
    expect((await c.wait(queued.taskId)).status).toBe('succeeded');
    await d.stop();
  });
});

describe('usage through the client', () => {
  it('usage(): runs, tokens and spend per day from the stored records, the estimated part apart, the limits beside; usage(id) is still today', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'], limits: { runsPerDay: 100, spendPerDayUsd: 20 } }],
      schedules: [{ name: 'nightly', cron: '0 3 * * *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'echo x', limits: { spendPerDayUsd: 2 } }],
    });
    const { today, yesterday } = await seedUsage(join(dir, '.headless'));
    const d = await startDaemon(dir);
    const c = createClient({ url: d.url });
    const report = await c.usage({ days: 3, workspaceId: 'ws' });
    expect(report.days).toHaveLength(3);
    const day = (name: string) => report.days.find((x) => x.day === name);
    expect(day(today)?.total).toEqual({ runs: 3, inputTokens: 3010, outputTokens: 401, costUsd: 0.875, estimatedCostUsd: 0.25 });
    expect(day(today)?.schedules).toEqual({ nightly: { runs: 1, inputTokens: 2000, outputTokens: 300, costUsd: 0.25, estimatedCostUsd: 0.25 } });
    expect(day(today)?.agents.claude).toMatchObject({ runs: 1, costUsd: 0.5 });
    expect(day(yesterday)?.total).toMatchObject({ runs: 1, costUsd: 1 });
    expect(report.limits).toEqual({
      workspaces: { ws: { runsPerDay: 100, spendPerDayUsd: 20 } },
      schedules: { nightly: { workspaceId: 'ws', spendPerDayUsd: 2 } },
      triggers: {},
    });
    expect((await c.usage()).days).toHaveLength(7);
    expect(await c.usage('ws')).toMatchObject({ workspaceId: 'ws', limits: { runsPerDay: 100 } });
    await expect(c.usage({ days: 91 })).rejects.toMatchObject({ status: 400, code: 'invalid_body' });
    await expect(c.usage({ workspaceId: 'nope' })).rejects.toMatchObject({ status: 404, code: 'workspace_not_found' });
    await d.stop();
  });
});
