import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentAdapter } from '../../src/core/agents/types';
import type { CommandAgentDefinition, HeadlessHandlerOptions } from '../../src/core/index';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { isDead, noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';

/**
 * docs/verify.md: the service runs a run's checks itself after its agent's turn, and asks the same
 * Session again with what failed, until they pass, bounded by attempts, time and progress.
 * The agents here are shell scripts: their first turn and every resume do what the test says.
 */

const dirs: string[] = [];
afterEach(async () => {
  await closeAllHosts();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** An agent whose first turn runs `first` and each resume `again` (its prompt saved to prompt-N.txt), in the run's folder. */
function scripted(first: string, again: string): CommandAgentDefinition {
  const resume = `n=$(ls prompt-*.txt 2>/dev/null | wc -l); printf '%s' "$1" > "prompt-$((n + 2)).txt"; ${again}; echo session=s-1`;
  return {
    command: 'sh',
    args: ['-c', `${first}; echo session=s-1`],
    resumeArgs: ['-c', resume, 'sh', '{prompt}'],
    sessionIdPattern: 'session=([A-Za-z0-9-]+)',
  };
}

/** A host whose one workspace is a folder of its own, every agent enabled there. */
async function host(
  agent: CommandAgentDefinition,
  more: Record<string, CommandAgentDefinition> = {},
  options: Partial<HeadlessHandlerOptions> = {},
): Promise<TestHost> {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-verify-'));
  dirs.push(dir);
  const h = await createTestHost({ workspaces: [{ id: 'ws', path: dir }], agents: { fixer: agent, ...more }, ...options });
  return { ...h, dir };
}

async function start(h: TestHost, verify: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const res = await h.request('POST', '/api/workspaces/ws/headless', {
    json: { prompt: 'The worker task: make state.txt right.', agent: 'fixer', verify, ...extra },
  });
  const body = (await res.json()) as Record<string, any>;
  expect(res.status, JSON.stringify(body)).toBe(202);
  return body.taskId as string;
}

const events = async (h: TestHost, taskId: string) =>
  ((await (await h.request('GET', `/api/headless/${taskId}/events?format=json&limit=1000`)).json()) as { events: Array<{ type: string; data: any }> }).events;

const STATE = { name: 'state', command: 'cat state.txt && grep -q fixed state.txt' };

describe('a verify loop', () => {
  it('asks the same Session again with what failed, and succeeds once the checks pass: every attempt recorded and on the timeline', async () => {
    const h = await host(scripted('echo broken > state.txt', 'echo fixed > state.txt'));
    const taskId = await start(h, { checks: [STATE, { name: 'always', command: 'echo fine' }] });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    expect(run.verify.verdict).toBe('passed');
    expect(run.verify.attempts.map((a: any) => a.passed)).toEqual([false, true]);
    expect(run.verify.attempts[0].checks[0]).toMatchObject({ name: 'state', exitCode: 1, passed: false, output: 'broken\n' });
    expect(run.verify.attempts[0].checks[1]).toMatchObject({ name: 'always', exitCode: 0, passed: true, output: 'fine\n' });
    const prompt = readFileSync(join(h.dir, 'prompt-2.txt'), 'utf8');
    expect(prompt).toContain('(attempt 2 of 3 comes next)');
    expect(prompt).toContain('Check "state" (`cat state.txt && grep -q fixed state.txt`) exited with 1');
    expect(prompt).toContain('```\nbroken\n\n```');
    const types = (await events(h, taskId)).map((e) => e.type);
    expect(types.filter((t) => t === 'verify.checked')).toHaveLength(4);
    expect((await events(h, taskId)).filter((e) => e.type === 'verify.verdict').map((e) => e.data.verdict)).toEqual(['pending', 'passed']);
  });

  it('that never passes ends failed, verify_failed, at its attempts, each recorded', async () => {
    const h = await host(scripted('echo 1 > n.txt', 'echo $(( $(cat n.txt) + 1 )) > n.txt'));
    const taskId = await start(h, { checks: [{ name: 'count', command: 'cat n.txt; exit 1' }], maxAttempts: 3 });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_failed' }, verify: { verdict: 'failed' } });
    expect(run.error.message).toBe('Its checks still fail after 3 attempts: count (exit 1).');
    expect(run.verify.attempts.map((a: any) => a.checks[0].output)).toEqual(['1\n', '2\n', '3\n']);
  });

  it('stops at no progress: the same failure twice ends it verify_stalled, before its attempts run out', async () => {
    const h = await host(scripted('echo broken > state.txt', 'true'));
    const taskId = await start(h, { checks: [STATE], maxAttempts: 5 });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_stalled' }, verify: { verdict: 'stalled' } });
    expect(run.verify.attempts).toHaveLength(2);
  });

  it('with onExhausted "keep", a run out of attempts ends as its agent did, the verdict on its record', async () => {
    const h = await host(scripted('echo broken > state.txt', 'echo still-broken-$RANDOM > state.txt'));
    const taskId = await start(h, { checks: [STATE], maxAttempts: 2, onExhausted: 'keep' });
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded', verify: { verdict: 'failed' } });
  });

  it('what a check prints of the run’s token never reaches the record', async () => {
    const h = await host(scripted('true', 'true'));
    const taskId = await start(h, { checks: [{ name: 'env', command: 'echo "token=$HEADLESS_RUN_TOKEN"' }], maxAttempts: 1, onExhausted: 'keep' });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run.verify.attempts[0].checks[0].output).toBe('token=[the run token]\n');
  });

  it('a check past its own timeout is stopped, its whole group, and counts as failing', async () => {
    const h = await host(scripted('true', 'true'));
    const check = { name: 'hangs', command: 'echo $$ > check.pid; sleep 600', timeoutMs: 500 };
    const taskId = await start(h, { checks: [check], maxAttempts: 1 });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_failed', message: 'Its checks still fail after 1 attempt: hangs (timed out).' } });
    expect(run.verify.attempts[0].checks[0]).toMatchObject({ timedOut: true, exitCode: null, passed: false });
    expect(await isDead(Number(readFileSync(join(h.dir, 'check.pid'), 'utf8')))).toBe(true);
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('the run’s own time bounds the whole loop: a check still running when it is up ends the run timed_out', async () => {
    const h = await host(scripted('true', 'true'));
    const taskId = await start(h, { checks: [{ name: 'slow', command: 'sleep 600' }] }, { timeoutMs: 1500 });
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run).toMatchObject({ status: 'timed_out', error: { code: 'timed_out' } });
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('the run’s budget counts every turn: a loop that passes its maxTurns ends failed, budget_exceeded, mid-loop', async () => {
    // Claude Code's adapter over a stand-in whose every turn makes two tool calls, whatever it is told.
    const claude = BUILTIN_AGENTS.find((agent) => agent.name === 'claude') as AgentAdapter;
    const script = join(__dirname, '../fixtures/budget-claude.mjs');
    const twoCalls: AgentAdapter = {
      ...claude,
      name: 'two-calls',
      command: process.execPath,
      identity: undefined,
      invocation: (input) => ({ command: process.execPath, args: [script, ...claude.invocation(input).args], stdin: '2' }),
    };
    const h = await host(scripted('true', 'true'), { 'two-calls': twoCalls as never });
    const res = await h.request('POST', '/api/workspaces/ws/headless', {
      json: { prompt: 'work', agent: 'two-calls', maxTurns: 3, verify: { checks: [{ name: 'never', command: 'exit 1' }], maxAttempts: 5 } },
    });
    const { taskId } = (await res.json()) as { taskId: string };
    const run = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(run).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' }, verify: { verdict: 'pending' } });
    expect(run.verify.attempts).toHaveLength(1);
  });

  it('a cancel during a check stops the check: the run is cancelled, no process of it is left', async () => {
    const h = await host(scripted('true', 'true'));
    const taskId = await start(h, { checks: [{ name: 'held', command: 'echo $$ > check.pid; sleep 600' }] });
    await waitFor(() => existsSync(join(h.dir, 'check.pid')), { what: 'the check to start' });
    // 202: it is being stopped (its check first).
    expect((await h.request('POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'cancelled' });
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('is refused at start for an agent that cannot be asked again on its session, naming those that can', async () => {
    const once: CommandAgentDefinition = { command: 'sh', args: ['-c', 'true'] };
    const h = await host(scripted('true', 'true'), { once });
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'once', verify: { checks: [STATE] } } });
    const problem = (await res.json()) as { code: string; detail: string };
    expect(res.status).toBe(400);
    expect(problem.code).toBe('verify_unsupported');
    expect(problem.detail).toContain('once cannot be asked again on its session headless');
    expect(problem.detail).toMatch(/agents here that can: .*fixer/);
  });

  it('bad settings are 400 invalid_body naming the field', async () => {
    const h = await host(scripted('true', 'true'));
    for (const verify of [{ checks: [] }, { checks: [STATE, STATE] }, { checks: [{ name: 'x' }] }, { checks: [STATE], maxAttempts: 11 }]) {
      const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'fixer', verify } });
      expect(res.status, JSON.stringify(verify)).toBe(400);
      expect(((await res.json()) as { detail: string }).detail).toContain('"verify');
    }
  });

  it('each check is a span under the run’s, failing ones marked as errors', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const h = await host(scripted('echo broken > state.txt', 'echo fixed > state.txt'), {}, { tracer: provider.getTracer('test') });
    const taskId = await start(h, { checks: [STATE] });
    expect((await h.waitEnded(taskId)).status).toBe('succeeded');
    const spans = () => exporter.getFinishedSpans();
    await waitFor(() => spans().some((s) => s.attributes['headless.task_id'] === taskId), { what: 'the run’s span' });
    const run = spans().find((s) => s.attributes['headless.task_id'] === taskId);
    const checks = spans().filter((s) => s.name === 'verify_check state');
    expect(checks.map((s) => [s.attributes['headless.check.attempt'], s.attributes['headless.exit_code'], s.status.code])).toEqual([
      [1, 1, 2],
      [2, 0, 0],
    ]);
    for (const check of checks) expect(check.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
  });

  describe('with a rubric grader', () => {
    /**
     * A grader on Claude Code's adapter (its read-only flags, its stream parser), a script in place
     * of the CLI: it reads state.txt (it may only read), saves what it was asked, and answers with
     * the result's structured_output, as the real CLI does.
     */
    const SAY = `if grep -q fixed state.txt; then v='{"verdict":"pass","failedCriteria":[],"explanation":"it says fixed"}'; else v='{"verdict":"fail","failedCriteria":["state says fixed"],"explanation":"state.txt still says broken"}'; fi`;
    const answerLine = `printf '{"type":"result","subtype":"success","is_error":false,"result":"graded","session_id":"g-1","structured_output":%s}\\n' "$v"`;
    const save = `printf '%s' "$1" > "grader-prompt-$(ls grader-prompt-*.txt 2>/dev/null | wc -l).txt"`;
    const claude = BUILTIN_AGENTS.find((a) => a.name === 'claude') as AgentAdapter;
    const standIn = (name: string, script: string): AgentAdapter => ({
      ...claude,
      name,
      command: 'sh',
      identity: undefined,
      invocation: (input) => ({ command: 'sh', args: ['-c', script, 'sh', input.prompt] }),
    });
    const graderAgent = standIn('grader', `${save}; ${SAY}; ${answerLine}`);

    it('judges the change once the checks pass: its failure goes back to the worker, its pass ends the run succeeded; each verdict recorded with its run', async () => {
      const h = await host(scripted('echo broken > state.txt', 'echo fixed > state.txt'), { grader: graderAgent as never });
      const taskId = await start(h, {
        checks: [{ name: 'exists', command: 'test -f state.txt' }],
        grader: { rubric: 'state.txt says fixed', agent: 'grader' },
      });
      const run = (await h.waitEnded(taskId)) as Record<string, any>;
      expect(run.status, JSON.stringify(run)).toBe('succeeded');
      const [first, second] = run.verify.attempts;
      expect(first).toMatchObject({
        passed: false,
        grader: { verdict: 'fail', failedCriteria: ['state says fixed'], explanation: 'state.txt still says broken' },
      });
      expect(second).toMatchObject({ passed: true, grader: { verdict: 'pass' } });
      // The worker was told what the grader said; the grader saw the rubric and the change, never the worker's prompt.
      expect(readFileSync(join(h.dir, 'prompt-2.txt'), 'utf8')).toContain('state.txt still says broken');
      const asked = readFileSync(join(h.dir, 'grader-prompt-0.txt'), 'utf8');
      expect(asked).toContain('state.txt says fixed');
      expect(asked).not.toContain('The worker task');
      // Each grader is a run of its own: read-only, named for the run it grades.
      const grader = (await (await h.request('GET', `/api/headless/${first.grader.taskId}`)).json()) as Record<string, any>;
      expect(grader).toMatchObject({ status: 'succeeded', agent: 'grader', metadata: { 'verify.grades': taskId }, policy: { permissions: 'read-only' } });
    });

    it('a grader that cannot judge ends the run failed, verify_grader_failed, naming its run', async () => {
      const broken = standIn('broken', 'exit 4');
      const h = await host(scripted('true', 'true'), { broken: broken as never });
      const taskId = await start(h, { grader: { rubric: 'anything', agent: 'broken' } });
      const run = (await h.waitEnded(taskId)) as Record<string, any>;
      expect(run).toMatchObject({ status: 'failed', error: { code: 'verify_grader_failed' }, verify: { verdict: 'failed' } });
      expect(run.error.message).toMatch(/^Its grader could not judge it: its run run_\w+ ended failed/);
    });
  });
});
