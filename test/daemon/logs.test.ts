import { afterEach, describe, expect, it } from 'vitest';
import { api, daemonDirs, runCli, startDaemon, waitRun, writeConfig } from '../helpers/daemon';
import { closeAllHosts, createTestHost, memoryLogger } from '../helpers/harness';

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
