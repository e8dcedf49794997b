import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { delimiter, join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { api, daemonDirs, runCli, startDaemon, waitRun, writeConfig } from '../helpers/daemon';
import { closeAllHosts, createTestHost, memoryLogger } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

const FAKE_BIN = resolve(__dirname, '../fixtures/bin');

/** docs/deployment.md, Logs: what the daemon says, at which level, and never a secret or a prompt. */

const dir = daemonDirs();
afterEach(closeAllHosts);

type Line = { level: number; msg: string; [field: string]: unknown };
const lines = (output: string): Line[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Line);

const PROMPT = 'echo the-prompt-must-never-be-logged';

describe('the daemon’s logs', () => {
  it('JSON lines on stderr: listening, a line per run start and end, the shutdown with the runs it interrupted; never the prompt', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const daemon = await startDaemon(cwd);
    const done = (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: PROMPT, agent: 'fake' })).json()) as { taskId: string };
    await waitRun(daemon, done.taskId);
    // Its line follows the final record (a loaded machine may show the record first): wait for it.
    await waitFor(() => lines(daemon.output()).some((l) => l.msg === 'run ended' && l.taskId === done.taskId), { what: "the first run's end line" });
    const running = (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'sleep 30000', agent: 'fake' })).json()) as { taskId: string };
    expect(await daemon.stop()).toBe(0);
    const logged = lines(daemon.output());
    expect(logged[0]).toMatchObject({ level: 30, msg: 'listening', url: daemon.url, store: 'sqlite' });
    expect(logged.filter((l) => l.taskId === done.taskId).map((l) => [l.msg, l.status])).toEqual([
      ['run started', undefined],
      ['run ended', 'succeeded'],
    ]);
    expect(logged.find((l) => l.msg === 'run started' && l.taskId === done.taskId)).toMatchObject({ workspaceId: 'ws', agent: 'fake', mode: 'async' });
    expect(logged.find((l) => l.msg === 'run ended' && l.taskId === done.taskId)).toMatchObject({ exitCode: 0, durationMs: expect.any(Number) });
    const end = logged.map((l) => l.msg);
    expect(end.slice(end.indexOf('shutting down: running runs are stopped and recorded interrupted'))).toEqual([
      'shutting down: running runs are stopped and recorded interrupted',
      'run ended',
      'stopped',
    ]);
    expect(logged.find((l) => l.msg === 'run ended' && l.taskId === running.taskId)).toMatchObject({ status: 'interrupted' });
    expect(daemon.output()).not.toContain('the-prompt-must-never-be-logged');
  });

  it('--log-level warn keeps the info lines out; a bad level is a usage error', async () => {
    const cwd = dir();
    const daemon = await startDaemon(cwd, ['--port', '0', '--log-level', 'warn']);
    await daemon.stop();
    expect(lines(daemon.output())).toEqual([]);
    const bad = await runCli(['serve', '--log-level', 'loud'], { cwd });
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('--log-level must be one of debug, info, warn, error, silent, not "loud"')]);
  });
});

describe('the story of a busy day, line by line', () => {
  it('100 runs through four agents, a webhook receiver that always fails, a restart: each run starts and ends in the log, each give-up is said, the restart too', async () => {
    const cwd = dir();
    const receiver = createServer((_, res) => res.writeHead(500).end()).listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const state = join(cwd, 'fake-cli-state');
    mkdirSync(state);
    // The fake claude and gemini replay what the real CLIs printed (test/fixtures/transcripts).
    const env = { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, ANTHROPIC_API_KEY: 'x', GEMINI_API_KEY: 'x', FAKE_CLI_STATE: state };
    writeConfig(cwd, {
      queue: { max: 200 },
      webhooks: { allowPrivateTargets: true, retryDelaysMs: [20], secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
      workspaces: [{ id: 'ws', path: '.', env, webhook: { url: hook } }],
    });
    const args = ['--port', '0', '--demo'];
    const first = await startDaemon(cwd, args);
    const agents = ['fake', 'demo', 'claude', 'gemini'];
    const started: Array<{ taskId: string; agent: string }> = [];
    for (let i = 0; i < 100; i++) {
      const agent = agents[i % 4]!;
      const res = await api(first, 'POST', '/api/workspaces/ws/headless', { agent, prompt: agent === 'fake' ? PROMPT : 'Say hello' });
      started.push({ taskId: ((await res.json()) as { taskId: string }).taskId, agent });
    }
    for (const run of started) expect((await waitRun(first, run.taskId, 240_000)).status).toBe('succeeded');
    // Every run's webhook has been given up (one retry), before the restart.
    await waitFor(() => lines(first.output()).filter((l) => String(l.msg).startsWith('gave up the webhook')).length === 100, {
      timeoutMs: 240_000,
      what: '100 give-ups',
    });
    const cut = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { agent: 'fake', prompt: 'sleep 30000' })).json()) as { taskId: string };
    expect(await first.stop()).toBe(0);
    const second = await startDaemon(cwd, args);
    expect(await second.stop()).toBe(0);
    receiver.close();

    const story = lines(first.output());
    for (const { taskId, agent } of started) {
      expect(story.filter((l) => l.taskId === taskId).map((l) => [l.msg, l.agent, l.status])).toEqual([
        ['run started', agent, undefined],
        ['run ended', agent, 'succeeded'],
      ]);
    }
    const gaveUp = story.filter((l) => String(l.msg).startsWith('gave up the webhook'));
    expect(gaveUp.every((l) => l.level === 50 && String(l.msg).includes(`to ${hook} after 2 attempt(s)`))).toBe(true);
    expect(story.find((l) => l.taskId === cut.taskId && l.msg === 'run ended')).toMatchObject({ status: 'interrupted' });
    expect(story.at(-1)).toMatchObject({ msg: 'stopped' });
    expect(lines(second.output()).map((l) => l.msg)).toEqual(expect.arrayContaining(['listening', 'stopped']));
    expect(first.output() + second.output()).not.toContain('the-prompt-must-never-be-logged');
  }, 300_000);
});

describe('a library user’s logger', () => {
  it('is told each run’s start and end with their fields', async () => {
    const { lines: seen, logger } = memoryLogger();
    const host = await createTestHost({ logger });
    const { taskId } = await host.start('echo hi');
    await host.waitEnded(taskId);
    expect(seen.filter((l) => l.fields.taskId === taskId).map((l) => [l.level, l.message, l.fields.status])).toEqual([
      ['info', 'run started', undefined],
      ['info', 'run ended', 'succeeded'],
    ]);
  });
});
