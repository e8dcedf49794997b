import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { isDead, noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';

/**
 * docs/verify.md through the built daemon: a check the service runs is one of its run's processes
 * (a crash's restart reaps it with the run's others) and is confined as its agent is (a sandboxed
 * run's check sees what its agent sees, nothing more).
 */

const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);
const isRoot = process.getuid?.() === 0;
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

/** An agent that ends each turn at once, and can be resumed: every check result is the service's own. */
const quick = { command: '/bin/sh', args: ['-c', 'echo session=s-1'], resumeArgs: ['-c', 'echo session=s-1'], sessionIdPattern: 'session=([A-Za-z0-9-]+)' };

async function start(daemon: Awaited<ReturnType<typeof startDaemon>>, workspace: string, verify: unknown): Promise<string> {
  const res = await api(daemon, 'POST', `/api/workspaces/${workspace}/headless`, { prompt: 'x', agent: 'quick', verify });
  const body = (await res.json()) as { taskId: string };
  expect(res.status, JSON.stringify(body)).toBe(202);
  return body.taskId;
}

describe('a verify check, through the built daemon', () => {
  it('kill -9 during a check: after the restart its run is interrupted and the check is gone, no process of the run left', async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, 'ws'));
    writeConfig(dir, { agents: { quick }, workspaces: [{ id: 'ws', path: 'ws' }] });
    const daemon = await startDaemon(dir);
    const taskId = await start(daemon, 'ws', { checks: [{ name: 'held', command: 'echo $$ > check.pid; sleep 600' }] });
    const pidFile = join(dir, 'ws', 'check.pid');
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', { what: 'the check to start' });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(await daemon.stop('SIGKILL')).toBeNull();
    const again = await startDaemon(dir);
    try {
      expect(await waitRun(again, taskId)).toMatchObject({ status: 'interrupted' });
      expect(await isDead(pid)).toBe(true);
      expect(await noneMarked([taskId])).toBe(true);
    } finally {
      await again.stop();
    }
  });

  it.skipIf(!hasBwrap)("a sandboxed run's check sees its workspace and not a file beside it that an unconfined one reads", async () => {
    const dir = tempDir();
    dirs.push(dir);
    for (const ws of ['open', 'box']) mkdirSync(join(dir, ws));
    const secret = join(dir, 'beside.txt');
    writeFileSync(secret, 'not-for-the-sandbox\n');
    writeFileSync(join(dir, 'box', 'own.txt'), 'its-own\n');
    // Under a root daemon the sandbox's user (65532) works in the workspace: the operator hands it over.
    if (isRoot) spawnSync('chown', ['-R', '65532:65532', join(dir, 'box')]);
    writeConfig(dir, {
      agents: { quick },
      workspaces: [
        { id: 'open', path: 'open' },
        { id: 'box', path: 'box', run: { sandbox: true } },
      ],
    });
    const daemon = await startDaemon(dir);
    try {
      const read = { checks: [{ name: 'reads', command: `cat own.txt 2>/dev/null; cat ${secret}` }], maxAttempts: 1, onExhausted: 'keep' };
      const open = (await waitRun(daemon, await start(daemon, 'open', read))) as Record<string, any>;
      expect(open.verify.attempts[0].checks[0]).toMatchObject({ exitCode: 0, output: 'not-for-the-sandbox\n' });
      const boxed = (await waitRun(daemon, await start(daemon, 'box', read))) as Record<string, any>;
      const check = boxed.verify.attempts[0].checks[0];
      expect(check.exitCode).not.toBe(0);
      expect(check.output).toContain('its-own');
      expect(check.output).not.toContain('not-for-the-sandbox');
      expect(boxed.policy).toMatchObject({ sandbox: true });
    } finally {
      await daemon.stop();
    }
  });
});
