import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

async function start(daemon: Awaited<ReturnType<typeof startDaemon>>, workspace: string, verify: unknown, agent = 'quick'): Promise<string> {
  const res = await api(daemon, 'POST', `/api/workspaces/${workspace}/headless`, { prompt: 'x', agent, verify });
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

/** An agent whose first turn runs `first` and each resume `again` (the service's prompt saved to prompt-N.txt), in its workspace. */
const scripted = (first: string, again: string) => ({
  command: 'sh',
  args: ['-c', `${first}; echo session=s-1`, 'sh', '{prompt}'],
  resumeArgs: ['-c', `n=$(ls prompt-*.txt 2>/dev/null | wc -l); printf '%s' "$1" > "prompt-$((n + 2)).txt"; ${again}; echo session=s-1`, 'sh', '{prompt}'],
  sessionIdPattern: 'session=([A-Za-z0-9-]+)',
});

/** A grader as any CLI without structured output of its own answers: through `headless-inbox result`. */
const verdict = (pass: boolean) =>
  JSON.stringify({
    verdict: pass ? 'pass' : 'fail',
    failedCriteria: pass ? [] : ['state says fixed'],
    explanation: pass ? 'it says fixed' : 'state.txt still says broken',
  });
const grader = {
  command: 'sh',
  args: [
    '-c',
    `if grep -q fixed state.txt; then headless-inbox result '${verdict(true)}'; else headless-inbox result '${verdict(false)}'; fi`,
    'sh',
    '{prompt}',
  ],
};

const STATE = { name: 'state', command: 'cat state.txt && grep -q fixed state.txt' };

describe('the verify loop, through the built daemon', () => {
  let daemon: Awaited<ReturnType<typeof startDaemon>>;
  let dir: string;
  const WORKSPACES = ['fix', 'never', 'stall', 'hang', 'cancel', 'graded'];

  beforeAll(async () => {
    dir = tempDir();
    dirs.push(dir);
    for (const ws of WORKSPACES) mkdirSync(join(dir, ws));
    if (isRoot) spawnSync('chown', ['-R', '65532:65532', join(dir, 'graded')]);
    writeConfig(dir, {
      agents: {
        quick,
        fixer: scripted('echo broken > state.txt', 'echo fixed > state.txt'),
        counter: scripted('echo 1 > n.txt', 'echo $(( $(cat n.txt) + 1 )) > n.txt'),
        stuck: scripted('echo broken > state.txt', 'true'),
        grader,
      },
      workspaces: WORKSPACES.map((id) => ({ id, path: id, ...(id === 'graded' && hasBwrap ? { run: { sandbox: true } } : {}) })),
    });
    daemon = await startDaemon(dir);
  });
  afterAll(() => daemon?.stop());

  const ended = async (taskId: string) => (await waitRun(daemon, taskId)) as Record<string, any>;
  const timeline = async (taskId: string) =>
    ((await (await api(daemon, 'GET', `/api/headless/${taskId}/events?format=json&limit=1000`)).json()) as { events: Array<{ type: string; data: any }> })
      .events;

  it('a check that fails once: the service asks the same Session again naming it and the attempt, and the run succeeds with both attempts recorded', async () => {
    const taskId = await start(daemon, 'fix', { checks: [STATE] }, 'fixer');
    const run = await ended(taskId);
    expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', verify: { verdict: 'passed' } });
    expect(run.verify.attempts.map((a: { passed: boolean }) => a.passed)).toEqual([false, true]);
    expect(run.verify.attempts[0].checks[0]).toMatchObject({ name: 'state', exitCode: 1, output: 'broken\n' });
    const told = readFileSync(join(dir, 'fix', 'prompt-2.txt'), 'utf8');
    expect(told).toContain('attempt 2 of 3');
    expect(told).toContain('state');
    const types = (await timeline(taskId)).map((e) => e.type);
    expect(types.filter((t) => t === 'verify.checked')).toHaveLength(2);
    expect(types).toContain('verify.verdict');
  });

  it('a check never fixed: failed, verify_failed, at its cap, every attempt recorded', async () => {
    const run = await ended(await start(daemon, 'never', { checks: [{ name: 'never', command: 'cat n.txt; exit 1' }], maxAttempts: 3 }, 'counter'));
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_failed' }, verify: { verdict: 'failed' } });
    expect(run.verify.attempts.map((a: Record<string, any>) => a.checks[0].output)).toEqual(['1\n', '2\n', '3\n']);
  });

  it('the same failure twice: failed, verify_stalled, before the cap', async () => {
    const run = await ended(await start(daemon, 'stall', { checks: [STATE], maxAttempts: 5 }, 'stuck'));
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_stalled' } });
    expect(run.verify.attempts).toHaveLength(2);
  });

  it('a check that hangs is stopped at its own timeout, its whole group, and counts as failing', async () => {
    const hung = { name: 'hangs', command: 'sleep 600 & echo $! > child.pid; wait', timeoutMs: 1000 };
    const run = await ended(await start(daemon, 'hang', { checks: [hung], maxAttempts: 1 }));
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_failed' } });
    expect(run.verify.attempts[0].checks[0]).toMatchObject({ name: 'hangs', timedOut: true });
    expect(await isDead(Number(readFileSync(join(dir, 'hang', 'child.pid'), 'utf8')))).toBe(true);
  });

  it('a cancel during a check: the run is cancelled and the check’s process group is gone', async () => {
    const taskId = await start(daemon, 'cancel', { checks: [{ name: 'held', command: 'sleep 600 & echo $! > child.pid; wait' }] });
    const pidFile = join(dir, 'cancel', 'child.pid');
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', { what: 'the check to start' });
    expect((await api(daemon, 'POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    expect(await ended(taskId)).toMatchObject({ status: 'cancelled' });
    expect(await isDead(Number(readFileSync(pidFile, 'utf8')))).toBe(true);
    expect(await noneMarked([taskId])).toBe(true);
  });

  it.skipIf(!hasBwrap)(
    'a rubric grader (a read-only run of its own, answering through headless-inbox): its failure goes back to the worker, its pass ends the run succeeded',
    async () => {
      const taskId = await start(
        daemon,
        'graded',
        { checks: [{ name: 'exists', command: 'test -f state.txt' }], grader: { rubric: 'state.txt says fixed', agent: 'grader' } },
        'fixer',
      );
      const run = await ended(taskId);
      expect(run.status, JSON.stringify(run)).toBe('succeeded');
      const [first, second] = run.verify.attempts;
      expect(first).toMatchObject({ passed: false, grader: { verdict: 'fail', explanation: 'state.txt still says broken' } });
      expect(second).toMatchObject({ passed: true, grader: { verdict: 'pass' } });
      expect(readFileSync(join(dir, 'graded', 'prompt-2.txt'), 'utf8')).toContain('state.txt still says broken');
      const graderRun = (await (await api(daemon, 'GET', `/api/headless/${first.grader.taskId}`)).json()) as Record<string, any>;
      expect(graderRun).toMatchObject({
        status: 'succeeded',
        agent: 'grader',
        metadata: { 'verify.grades': taskId },
        policy: { permissions: 'read-only', sandbox: true },
      });
    },
  );
});
