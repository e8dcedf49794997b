import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type AgentAdapter, MAX_TURNS, type TurnContext, type TurnPolicy, createCommandAgent } from '../../src/core/index';
import { markerTurn } from '../fixtures/marker-turn';
import { type TestHost, closeAllHosts, createTestHost, fakeAgent, FAKE_AGENT } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/**
 * Turn policies (docs/internals.md: The turn loop) through the handler: a test-only policy
 * registered with `turnPolicies`, with the fake agent as a command agent (a new process per turn,
 * resuming the session it printed), and gemini over ACP (the fake CLI replaying its recording),
 * whose session stays open for the next prompt.
 */
const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
afterEach(closeAllHosts);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The fake agent, resumed with `resumed <session>` printed first, its last line its last message. */
function talkingAgent(): AgentAdapter {
  const base = createCommandAgent('talk', { ...fakeAgent, resumeArgs: [FAKE_AGENT, 'echo resumed {agentSessionId}; {prompt}'] });
  return {
    ...base,
    parser(input) {
      const inner = base.parser(input);
      let last: string | undefined;
      return {
        line(line) {
          if (line.trim() !== '') last = line.trim();
          return inner.line(line);
        },
        sessionId: () => inner.sessionId(),
        finish: (exitCode) => ({ ...inner.finish(exitCode), ...(last === undefined ? {} : { lastMessage: last }) }),
      };
    },
  };
}

async function host(turnPolicies: TurnPolicy[]): Promise<TestHost> {
  const ws = mkdtempSync(join(tmpdir(), 'hrw-turns-'));
  dirs.push(ws);
  return createTestHost({
    workspaces: [
      { id: 'ws', path: ws, agents: ['talk'] },
      { id: 'acp', path: ws, agents: ['gemini-acp'], env: { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' } },
    ],
    agents: { talk: talkingAgent() },
    turnPolicies,
  });
}

async function run(h: TestHost, workspace: string, body: Record<string, unknown>): Promise<string> {
  const res = await h.request('POST', `/api/workspaces/${workspace}/headless`, { json: body });
  const started = (await res.json()) as Record<string, any>;
  expect(res.status, JSON.stringify(started)).toBe(202);
  return started.taskId as string;
}

async function ended(h: TestHost, taskId: string): Promise<Record<string, any>> {
  let record: Record<string, any> = {};
  await waitFor(async () => {
    record = (await (await h.request('GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
    return !['running', 'queued'].includes(record.status);
  });
  return record;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const timeline = async (h: TestHost, taskId: string) =>
  ((await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string; data: any }> }).events;
const messages = async (h: TestHost, taskId: string) => (await timeline(h, taskId)).filter((e) => e.type === 'message').map((e) => String(e.data.text));

describe('turn policies (docs/internals.md: The turn loop)', () => {
  it('a registered policy gets exactly one more turn, on the session the first printed, noted on the timeline', async () => {
    const h = await host([markerTurn('MARKER', 'echo second turn')]);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo MARKER seen' });
    expect(await ended(h, taskId)).toMatchObject({ status: 'succeeded', lastMessage: 'second turn' });
    expect(h.spawner.count).toBe(2);
    const output = (await (await h.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string };
    expect(output.stdout).toContain('resumed s1');
    expect((await messages(h, taskId)).filter((m) => m.startsWith('(the service asks again'))).toEqual([
      '(the service asks again: its last message says MARKER)',
    ]);
  });

  it('without the marker, no policy has an opinion: one turn', async () => {
    const h = await host([markerTurn('MARKER', 'echo second turn')]);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo plain' });
    expect(await ended(h, taskId)).toMatchObject({ status: 'succeeded', lastMessage: 'plain' });
    expect(h.spawner.count).toBe(1);
  });

  it('a policy that always asks again is stopped at MAX_TURNS turns', async () => {
    const always: TurnPolicy = { name: 'always', decide: () => ({ next: { prompt: 'echo again', reason: 'again' } }) };
    const h = await host([always]);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo first' });
    expect(await ended(h, taskId)).toMatchObject({ status: 'succeeded' });
    expect(h.spawner.count).toBe(MAX_TURNS);
  });

  it('asked in order: one that throws or has no opinion passes to the next; the first end decides, and none after it is asked', async () => {
    const seen: TurnContext[] = [];
    const policies: TurnPolicy[] = [
      { name: 'throws', decide: () => Promise.reject(new Error('a bug in it')) },
      { name: 'silent', decide: (context) => void seen.push(context) },
      { name: 'ender', decide: () => ({ end: { status: 'failed', error: { code: 'checks_failed', message: 'The checks failed.' } } }) },
      { name: 'never', decide: () => ({ next: { prompt: 'echo never', reason: 'never' } }) },
    ];
    const h = await host(policies);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo done', metadata: { ticket: 'T-1' } });
    expect(await ended(h, taskId)).toMatchObject({ status: 'failed', error: { code: 'checks_failed', message: 'The checks failed.' } });
    expect(h.spawner.count).toBe(1);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      turn: 1,
      asked: [],
      canContinue: true,
      verdict: { agentSessionId: 's1', lastMessage: 'done' },
      record: { taskId, metadata: { ticket: 'T-1' } },
    });
  });

  it('a policy still deciding when the run’s time is up is aborted, and the run ends timed_out', async () => {
    let aborted = false;
    const slow: TurnPolicy = {
      name: 'slow',
      decide: ({ signal }) =>
        new Promise((settle) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            settle(undefined);
          });
        }),
    };
    const h = await host([slow]);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo done', timeoutMs: 2000 });
    expect(await ended(h, taskId)).toMatchObject({ status: 'timed_out', error: { code: 'timed_out' } });
    expect(aborted).toBe(true);
    expect(h.spawner.count).toBe(1);
  });

  it('a run cancelled while its policies decide ends cancelled at once: the decision is aborted, the next turn never starts', async () => {
    const deciding = deferred();
    let aborted = false;
    const waiting: TurnPolicy = {
      name: 'waiting',
      decide: ({ signal }) => {
        deciding.resolve();
        return new Promise((settle) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            settle({ next: { prompt: 'echo too late', reason: 'again' } });
          });
        });
      },
    };
    const h = await host([waiting]);
    const taskId = await run(h, 'ws', { prompt: 'session s1; echo done' });
    await deciding.promise;
    expect((await h.request('POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    expect(await ended(h, taskId)).toMatchObject({ status: 'cancelled' });
    expect(aborted).toBe(true);
    expect(h.spawner.count).toBe(1);
  });

  it('over ACP, the structured-output repair turn is one more prompt on the open session', async () => {
    const h = await host([]);
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
    const taskId = await run(h, 'acp', { agent: 'gemini-acp', prompt: 'Say hello.', outputSchema: schema });
    expect(await ended(h, taskId)).toMatchObject({ status: 'failed', error: { code: 'output_missing' } });
    expect(h.spawner.count).toBe(1);
    const asked = (await messages(h, taskId)).filter((m) => m.startsWith('(the service asks again'));
    expect(asked).toEqual(['(the service asks again: the agent gave no structured answer)']);
  });

  it('over ACP, the next prompt goes to the open session: one process, two prompt turns, the usage of both', async () => {
    const h = await host([markerTurn('MOCK REPLY', 'Say hello again.')]);
    const taskId = await run(h, 'acp', { agent: 'gemini-acp', prompt: 'Say hello.' });
    expect(await ended(h, taskId)).toMatchObject({ status: 'succeeded', lastMessage: 'MOCK REPLY 1', usage: { inputTokens: 24, outputTokens: 14 } });
    expect(h.spawner.count).toBe(1);
    expect(await messages(h, taskId)).toEqual(['MOCK REPLY 1', '(the service asks again: its last message says MOCK REPLY)', 'MOCK REPLY 1']);
  });

  it('over ACP, the later turns share the run’s budget: the second turn passes a maxTokens the first stayed under', async () => {
    const h = await host([markerTurn('MOCK REPLY', 'Say hello again.')]);
    const taskId = await run(h, 'acp', { agent: 'gemini-acp', prompt: 'Say hello.', maxTokens: 30 });
    expect(await ended(h, taskId)).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' } });
    expect(h.spawner.count).toBe(1);
  });

  it('refuses a policy without a name or decide, and a name taken', async () => {
    await expect(host([{ name: '', decide: () => undefined }])).rejects.toThrow('turnPolicies[0] must be an object with a name and a decide function');
    await expect(host([{ name: 'structured-output', decide: () => undefined }])).rejects.toThrow('the name structured-output is taken');
  });
});
