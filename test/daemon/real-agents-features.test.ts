import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, waitRun } from '../helpers/daemon';
import { ACP, BIN, type Mode, paths, realTier, requestsSince, run, session, tier } from '../helpers/real-tier';
import { waitFor } from '../helpers/wait';

/**
 * The real agent CLIs (test/helpers/real-tier.ts) in what the service adds across agents: amp and
 * codex's edge cases, the working directory, a workspace's own configuration, traces, budgets,
 * structured output, the Agent Client Protocol, approvals.
 */
realTier();

/**
 * Amp asks its own service (AMP_URL) who the key belongs to before any model call, so only its
 * refusals can be driven locally; its success path is held to its documented shape by the fake.
 */
describe('amp (the real CLI) through the daemon, as far as it runs without its service', () => {
  it('rejects an unknown option, so a run that reaches its service proves the adapter’s flags are all accepted', () => {
    const r = spawnSync(join(BIN, 'amp'), ['--execute', '--stream-json', '--no-such-flag'], {
      input: 'x',
      encoding: 'utf8',
      env: { ...process.env, TERM: 'dumb' },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/unknown option '--no-such-flag'/);
  });

  it('a refused key (401) is failed with amp’s reason, after its service was asked, and its Session is not resumable', async () => {
    const before = tier.mock.requests.length;
    const record = await run('e401', { agent: 'amp', prompt: 'hello', wait: true });
    expect(record).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(record.error.message).toMatch(/Invalid or missing API key/);
    expect(tier.mock.requests.slice(before).some((r) => r.protocol === 'amp' && r.key === 'mock-401')).toBe(true);
    expect(await session(record.resumeId)).toMatchObject({ resumable: false });
  });

  it('a failing service (500) is failed with amp’s reason', async () => {
    const record = await run('e500', { agent: 'amp', prompt: 'hello', wait: true });
    expect(record).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(record.error.message).toMatch(/Amp server returned an error/);
  });

  it('no credentials: refused at once with spawn_failed (amp would wait at a login prompt)', async () => {
    const res = await api(tier.daemon, 'POST', '/api/workspaces/nocreds/headless', { agent: 'amp', prompt: 'hello', wait: true });
    const body = (await res.json()) as Record<string, any>;
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ code: 'spawn_failed' });
    expect(body.detail).toMatch(/amp: it has no credentials.*AMP_API_KEY/);
  });
});

describe('codex retrying a dropped stream', () => {
  it('prints "Reconnecting..." error events, then completes: the run is succeeded', async () => {
    const record = await run('flaky', { agent: 'codex', prompt: 'hello', wait: true });
    expect(record.output.stdout).toMatch(/"type":"error","message":"Reconnecting\.\.\. 1\/1/);
    expect(record).toMatchObject({ status: 'succeeded', exitCode: 0 });
  });
});

describe('codex with no credentials and no provider of its own', () => {
  it('is refused at once with spawn_failed, instead of retrying forever', async () => {
    const res = await api(tier.daemon, 'POST', '/api/workspaces/bare/headless', { agent: 'codex', prompt: 'hello', wait: true });
    const body = (await res.json()) as Record<string, any>;
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ code: 'spawn_failed' });
    expect(body.detail).toMatch(/codex: it has no credentials.*set OPENAI_API_KEY/);
    expect(await waitRun(tier.daemon, body.taskId)).toMatchObject({ status: 'failed', error: { code: 'spawn_failed' } });
  });
});

describe('the working directory of a run', () => {
  it('opencode writes where PWD says: every run gets PWD = the workspace, so its file lands there', async () => {
    const record = await run('ok', { agent: 'opencode', prompt: 'WRITE_FILE pwd-check.txt', wait: true });
    expect(record.status).toBe('succeeded');
    expect(existsSync(join(paths.ok, 'pwd-check.txt'))).toBe(true);
    expect(existsSync(join(tier.daemon.dir, 'pwd-check.txt'))).toBe(false);
    // The real tool call is in the timeline: its name and how it ended, never its input.
    const timeline = (await (await api(tier.daemon, 'GET', `/api/headless/${record.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    const tools = timeline.events.filter((e) => e.type === 'tool').map((e) => e.data);
    expect(tools).toEqual([{ name: 'write', status: 'succeeded', id: expect.any(String) }]);
  });
});

describe("a workspace's own executable configuration", () => {
  it('claude: a hook in the workspace’s .claude/settings.json runs in a full run, never in a read-only one', async () => {
    const hook = (mode: Mode) => {
      mkdirSync(join(paths[mode], '.claude'), { recursive: true });
      const settings = { hooks: { SessionStart: [{ hooks: [{ type: 'command', command: `touch ${join(paths[mode], 'hook-ran.txt')}` }] }] } };
      writeFileSync(join(paths[mode], '.claude', 'settings.json'), JSON.stringify(settings));
    };
    try {
      hook('ok');
      hook('ro');
      expect((await run('ok', { agent: 'claude', prompt: 'hello', wait: true })).status).toBe('succeeded');
      expect(existsSync(join(paths.ok, 'hook-ran.txt'))).toBe(true);
      expect((await run('ro', { agent: 'claude', prompt: 'hello', wait: true })).status).toBe('succeeded');
      expect(existsSync(join(paths.ro, 'hook-ran.txt'))).toBe(false);
    } finally {
      for (const mode of ['ok', 'ro'] as const) rmSync(join(paths[mode], '.claude'), { recursive: true, force: true });
    }
  });
});

describe('traces of a real agent', () => {
  it('claude: its run’s span under the caller’s trace, with a child span for the tool call the model asked for', async () => {
    const [traceId, parent] = ['5bf92f3577b34da6a3ce929d0e0e4736', '10f067aa0ba902b7'];
    const res = await api(
      tier.daemon,
      'POST',
      '/api/workspaces/ok/headless',
      { agent: 'claude', prompt: 'WRITE_FILE traced.txt', wait: true, timeoutMs: 600_000 },
      { traceparent: `00-${traceId}-${parent}-01` },
    );
    const record = (await res.json()) as Record<string, any>;
    expect(record.status).toBe('succeeded');
    const run = () => tier.otlp.spans.find((s) => s.attributes['headless.task_id'] === record.taskId);
    await waitFor(() => run() !== undefined, { what: 'the run’s span' });
    expect(run()).toMatchObject({
      name: 'invoke_agent claude',
      traceId,
      parentSpanId: parent,
      attributes: { 'gen_ai.usage.output_tokens': expect.any(Number) },
    });
    const tools = tier.otlp.spans.filter((s) => s.parentSpanId === run()!.spanId);
    expect(tools).toEqual([
      expect.objectContaining({
        name: 'execute_tool Write',
        traceId,
        attributes: expect.objectContaining({ 'gen_ai.tool.name': 'Write', 'gen_ai.tool.call.id': expect.any(String) }),
      }),
    ]);
  });
});

describe("claude's own budget (the real CLI, its --max-turns and --max-budget-usd)", () => {
  it('a run with room in its budget succeeds: both flags are accepted', async () => {
    const done = await run('ok', { agent: 'claude', prompt: 'hello', wait: true, maxTurns: 5, maxCostUsd: 5 });
    expect(done).toMatchObject({ status: 'succeeded', budget: { maxTurns: 5, maxCostUsd: 5 } });
  });

  it('one turn allowed, and the model asks for a tool call: Claude Code stops itself, and the run is budget_exceeded', async () => {
    const done = await run('ok', { agent: 'claude', prompt: 'WRITE_FILE budget.txt', wait: true, maxTurns: 1 });
    expect(done).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' } });
    expect(done.error.message).toMatch(/^The agent stopped at its maxTurns limit: /);
  });
});

describe('structured output (docs/structured-output.md), the real CLIs against the mock model', () => {
  const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };

  it.each(['claude', 'codex', 'qwen'] as const)('%s: its own structured output is the run’s result', async (agent) => {
    const done = await run('ok', { agent, prompt: 'STRUCTURED {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
  });

  it('codex: an answer that does not match gets one repair turn on the same session, whose answer is the result', async () => {
    const done = await run('ok', { agent: 'codex', prompt: 'STRUCTURED {"answer":42} THEN {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
    const events = (await (await api(tier.daemon, 'GET', `/api/headless/${done.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    expect(events.events.some((e) => e.type === 'message' && /the service asks again: .*\/answer must be string/.test(e.data.text))).toBe(true);
  });

  it('gemini (no structured output of its own): answers through headless-inbox result, is refused, is asked again, and its second answer ends the run', async () => {
    const done = await run('ok', { agent: 'gemini', prompt: 'STRUCTURED {"answer":42} THEN {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
    const events = (await (await api(tier.daemon, 'GET', `/api/headless/${done.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    // Two answers through its shell tool: the one refused, then the one that ended the run.
    expect(events.events.filter((e) => e.type === 'tool' && e.data.status === 'started')).toHaveLength(2);
    expect(events.events.some((e) => e.type === 'message' && /the service asks again: the agent gave no structured answer/.test(e.data.text))).toBe(true);
  });

  it('opencode (no structured output of its own): answers through headless-inbox result with its bash tool', async () => {
    const done = await run('ok', { agent: 'opencode', prompt: 'STRUCTURED {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
  });

  it('gemini over ACP: answers through headless-inbox result, its shell call allowed by the run’s policy', async () => {
    const done = await run('ok', { agent: 'gemini-acp', prompt: 'STRUCTURED {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
  });

  it('an answer that still does not match after its repair turn: failed, output_invalid, naming what does not match', async () => {
    const done = await run('ok', { agent: 'codex', prompt: 'STRUCTURED {"answer":42}', outputSchema: schema });
    expect(done).toMatchObject({ status: 'failed', error: { code: 'output_invalid', message: expect.stringContaining('/answer must be string') } });
    expect(done).not.toHaveProperty('result');
  });
});

describe('verify (docs/verify.md), the real CLIs against the mock model', () => {
  it.each(['claude', 'codex', 'gemini', 'gemini-acp'] as const)(
    '%s: told by the service that its check fails, it writes the file on the second attempt, on the same session (over ACP: the live one)',
    async (agent) => {
      const file = `verified-${agent}.txt`;
      rmSync(join(paths.ok, file), { force: true });
      const before = tier.mock.requests.length;
      const done = await run('ok', { agent, prompt: `VERIFY_FILE ${file}`, verify: { checks: [{ name: 'file', command: `test -f ${file}` }] } });
      expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', verify: { verdict: 'passed' } });
      expect(done.verify.attempts.map((a: { passed: boolean }) => a.passed)).toEqual([false, true]);
      expect(existsSync(join(paths.ok, file))).toBe(true);
      // The service's prompt reached the model with the earlier turn in the same conversation.
      const asked = requestsSince(before).find((body) => body.includes('they fail (attempt 2 of 3 comes next)'));
      expect(asked).toContain(`VERIFY_FILE ${file}`);
    },
  );
});

describe('verify and a budget, the real claude against the mock model', () => {
  it('the run’s budget counts every turn of the loop: past its maxCostUsd it ends failed, budget_exceeded, mid-loop', async () => {
    // Each turn against the mock costs about $0.00028: the second passes $0.0004. The check's output differs each time (not stalled).
    const never = { name: 'never', command: 'date +%s%N; false' };
    const done = await run('ok', { agent: 'claude', prompt: 'hello', maxCostUsd: 0.0004, verify: { checks: [never], maxAttempts: 3 } });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' }, verify: { verdict: 'pending' } });
    expect(done.verify.attempts).toHaveLength(1);
  });
});

describe.each(ACP)('%s: the real CLI over the Agent Client Protocol', (agent) => {
  it('runs to succeeded with the same reply as through its stdout, its session id captured; a resume loads that session (gemini: not resumable over ACP)', async () => {
    const first = await run('ok', { agent, prompt: `Remember the word ALPHA-${agent}.`, wait: true });
    expect(first, JSON.stringify(first)).toMatchObject({ status: 'succeeded', exitCode: 0, agent });
    expect(first.lastMessage).toMatch(/^MOCK REPLY \d+$/);
    const resumes = agent !== 'gemini-acp';
    expect(await session(first.resumeId)).toMatchObject({ resumable: resumes, runCount: 1 });
    const timeline = (await (await api(tier.daemon, 'GET', `/api/headless/${first.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    expect(timeline.events.map((e) => e.type).filter((t) => t !== 'usage')).toEqual(['run.started', 'agent.session', 'message', 'run.ended']);
    expect(timeline.events.find((e) => e.type === 'message')?.data.text).toBe(first.lastMessage);
    if (!resumes) return;

    const before = tier.mock.requests.length;
    const again = await run('ok', { agent, resumeId: first.resumeId, prompt: `Which word? BETA-${agent}` });
    expect(again, JSON.stringify(again)).toMatchObject({ status: 'succeeded', resumeId: first.resumeId });
    const resumed = requestsSince(before).filter((body) => body.includes(`BETA-${agent}`));
    expect(resumed.some((body) => body.includes(`ALPHA-${agent}`))).toBe(true);
  });
});

/** How each agent names its file write when it asks: cline names no kind or path, only the start of its patch in its title. */
const WRITE_QUESTION = {
  claude: (file: string) => ({ kind: 'edit', paths: [expect.stringContaining(file)] }),
  'gemini-acp': (file: string) => ({ kind: 'edit', paths: [expect.stringContaining(file)] }),
  'cline-acp': (_file: string) => ({
    kind: 'other',
    paths: [],
    // The shown title escapes the backslash of the JSON's "\n" (docs/approvals.md: what the approver sees).
    title: expect.stringMatching(/^apply_patch: \{"input":"\*\*\* Begin Patch\\\\n\*\*\* Add File: ask-/),
  }),
};

describe.each(['claude', 'gemini-acp', 'cline-acp'] as const)(
  '%s asks before it writes (docs/approvals.md): the real CLI, answered through the API',
  (agent) => {
    /** Starts a run that asks to write `file`, and waits for its question. */
    async function asking(mode: 'ask' | 'askfast', file: string): Promise<{ taskId: string; question: Record<string, any> }> {
      const res = await api(tier.daemon, 'POST', `/api/workspaces/${mode}/headless`, { agent, prompt: `WRITE_FILE ${file}`, timeoutMs: 600_000 });
      const { taskId } = (await res.json()) as { taskId: string };
      let question: Record<string, any> | undefined;
      await waitFor(
        async () => {
          const list = (await (await api(tier.daemon, 'GET', `/api/approvals?taskId=${taskId}`)).json()) as { approvals: Array<Record<string, any>> };
          question = list.approvals[0];
          return question !== undefined;
        },
        { what: `${agent}'s question`, timeoutMs: 300_000 },
      );
      return { taskId, question: question! };
    }

    it('allowed: it writes its file; denied: it does not, and the run goes on to succeed', async () => {
      const allowed = await asking('ask', `ask-${agent}.txt`);
      expect(allowed.question).toMatchObject({ status: 'pending', tool: WRITE_QUESTION[agent](`ask-${agent}.txt`) });
      expect(existsSync(join(paths.ask, `ask-${agent}.txt`))).toBe(false);
      expect((await api(tier.daemon, 'POST', `/api/approvals/${allowed.question.id}`, { decision: 'allow' })).status).toBe(200);
      expect(await waitRun(tier.daemon, allowed.taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { asked: 1, allowed: 1 } });
      expect(existsSync(join(paths.ask, `ask-${agent}.txt`))).toBe(true);

      const denied = await asking('ask', `deny-${agent}.txt`);
      expect((await api(tier.daemon, 'POST', `/api/approvals/${denied.question.id}`, { decision: 'deny' })).status).toBe(200);
      expect(await waitRun(tier.daemon, denied.taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { denied: 1 } });
      expect(existsSync(join(paths.ask, `deny-${agent}.txt`))).toBe(false);
    });

    it('unanswered: its fallback (deny) answers it when its time runs out', async () => {
      const { taskId } = await asking('askfast', `late-${agent}.txt`);
      expect(await waitRun(tier.daemon, taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { denied: 1, timedOut: 1 } });
      expect(existsSync(join(paths.askfast, `late-${agent}.txt`))).toBe(false);
    });
  },
);

// qwen retries a 500 for about a minute before it gives up, in either mode: its refusal is checked over stdout only.
it.each(['gemini-acp', 'opencode-acp', 'cline-acp'] as const)('%s: a refused model call fails the run over ACP', async (agent) => {
  const done = await run('e500', { agent, prompt: 'hello', wait: true });
  expect(done.status, JSON.stringify(done)).toBe('failed');
});

// Why docs/agents.md says to keep their stdout twins where a failure must fail the run.
it.each([
  ['goose-acp', /^Ran into this error: Server error/],
  ['copilot-acp', /^Error: 500 The server had an error/],
] as const)('%s over ACP tells a refused model call only in its message, ending its turn as usual: the run is succeeded', async (agent, said) => {
  const done = await run('e500', { agent, prompt: 'hello', wait: true });
  expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', lastMessage: expect.stringMatching(said) });
});
