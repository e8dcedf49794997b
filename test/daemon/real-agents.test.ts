import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mockEnv, writeHome } from '../fixtures/mock-model/homes.mjs';
import { type MockModel, startMockModel } from '../fixtures/mock-model/server.mjs';
import { type Daemon, api, cleanupDaemons, startDaemon, waitRun } from '../helpers/daemon';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver';
import { waitFor } from '../helpers/wait';

/**
 * The real agent CLIs from the npm registry (pinned dev dependencies), run through the real
 * daemon against a local mock model server, each with a scratch HOME. Every failure mode is
 * made fast by the mock (errors marked not to be retried) or by the CLI's own retry settings.
 */

// HEADLESS_REAL_CLI_BIN: other builds of the CLIs (npm run test:latest-clis puts the newest there).
const BIN = process.env.HEADLESS_REAL_CLI_BIN || resolve(__dirname, '../../node_modules/.bin');
const REAL = ['claude', 'codex', 'gemini', 'qwen', 'opencode', 'copilot', 'goose'] as const;
/** The built-ins that also speak ACP, each through it (docs/agents.md: ACP). */
const ACP = ['gemini-acp', 'qwen-acp', 'opencode-acp'] as const;
type Real = (typeof REAL)[number];

/** Workspaces, one per behaviour of the mock; `wipe` has a HOME the tests can wipe; `flaky` drops every other stream. */
const MODES = {
  ok: 'mock-ok',
  e401: 'mock-401',
  e500: 'mock-500',
  nocreds: undefined,
  wipe: 'mock-ok',
  flaky: 'mock-flaky',
  box: 'mock-ok',
  ro: 'mock-ok',
  ask: 'mock-ok',
  askfast: 'mock-ok',
} as const;
/** `box` runs each CLI in a bubblewrap sandbox (where bwrap is installed); `ro` with its read-only flags. */
const POLICIES: Partial<Record<keyof typeof MODES, Record<string, unknown>>> = {
  box: { sandbox: true },
  ro: { permissions: 'read-only' },
  // docs/approvals.md: every question waits for a caller; `askfast`'s get their fallback after a second.
  ask: { permissions: 'ask' },
  askfast: { permissions: 'ask', approvals: { timeoutMs: 1000 } },
};
// In CI the sandboxed runs must run (npm test installs bubblewrap); elsewhere they need it installed.
const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);
type Mode = keyof typeof MODES;

let mock: MockModel;
/** The daemon exports its traces here (docs/deployment.md: Traces). */
let otlp: OtlpReceiver;
let daemon: Daemon;
let root: string;
/** The PATH of every run: BIN, after a folder with the `goose` link (goose's npm package names its binary for its platform). */
let PATH: string;
const homes = {} as Record<Mode, string>;
const paths = {} as Record<Mode, string>;

beforeAll(async () => {
  mock = await startMockModel();
  root = mkdtempSync(join(tmpdir(), 'hrw-real-'));
  mkdirSync(join(root, 'bin'));
  symlinkSync(join(BIN, 'goose-binary-linux-x64'), join(root, 'bin', 'goose'));
  PATH = [join(root, 'bin'), BIN, process.env.PATH].join(delimiter);
  const workspaces: Array<Record<string, unknown>> = (Object.keys(MODES) as Mode[]).map((mode) => {
    homes[mode] = join(root, `home-${mode}`);
    paths[mode] = join(root, `ws-${mode}`);
    mkdirSync(paths[mode]);
    writeHome(homes[mode], mock.url);
    return {
      id: mode,
      path: paths[mode],
      agents: [...REAL, 'amp', ...ACP],
      env: { ...mockEnv(homes[mode], mock.url, MODES[mode]), PATH },
      ...(mode === 'box' && !hasBwrap ? {} : POLICIES[mode]),
      // In the sandbox, the network reaches the mock model (and the service) only.
      ...(mode === 'box' ? { network: [new URL(mock.url).host] } : {}),
    };
  });
  // No credentials and a HOME with no agent config at all.
  const bare = join(root, 'home-bare');
  mkdirSync(bare);
  workspaces.push({ id: 'bare', path: bare, agents: ['codex'], env: { HOME: bare, PATH } });
  const daemonDir = join(root, 'daemon');
  mkdirSync(daemonDir);
  const config = join(daemonDir, 'headless.config.json');
  writeFileSync(config, JSON.stringify({ maxConcurrentRuns: 4, workspaces }));
  // The daemon's own PWD is its folder: a run must never inherit it.
  otlp = await startOtlpReceiver();
  daemon = await startDaemon(daemonDir, ['--config', config, '--port', '0'], {
    PWD: daemonDir,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
}, 600_000);

afterAll(async () => {
  await daemon?.stop();
  await mock?.close();
  await otlp?.close();
  cleanupDaemons();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function run(mode: Mode, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await api(daemon, 'POST', `/api/workspaces/${mode}/headless`, { timeoutMs: 600_000, ...body });
  const answer = (await res.json()) as Record<string, any>;
  if (body.wait) {
    expect(res.status, JSON.stringify(answer)).toBe(200);
    return answer;
  }
  expect(res.status, JSON.stringify(answer)).toBe(202);
  return waitRun(daemon, answer.taskId, 600_000);
}

const session = async (resumeId: string) => (await (await api(daemon, 'GET', `/api/sessions/${resumeId}`)).json()) as Record<string, any>;
const requestsSince = (count: number) => mock.requests.slice(count).map((r) => JSON.stringify(r.body));

/** What each CLI says when its model call is refused, has failed, or it has no credentials. */
const REASONS: Record<Real, { e401: RegExp; e500: RegExp; nocreds: RegExp; unknownResume: RegExp }> = {
  claude: { e401: /Invalid API key/, e500: /API Error: 500/, nocreds: /Not logged in/, unknownResume: /No conversation found/ },
  codex: { e401: /401 Unauthorized/, e500: /high demand|500/, nocreds: /Missing environment variable: `MOCK_API_KEY`/, unknownResume: /no rollout found/ },
  gemini: {
    e401: /API key not valid/,
    e500: /Internal error encountered/,
    nocreds: /must specify the GEMINI_API_KEY/,
    unknownResume: /Invalid session identifier|No previous sessions found/,
  },
  qwen: { e401: /API Error: 401/, e500: /500/, nocreds: /auth|API key|credential/i, unknownResume: /No saved session found/ },
  opencode: {
    e401: /APIError: Incorrect API key/,
    e500: /APIError: The server had an error/,
    nocreds: /API key|APIError/i,
    unknownResume: /Session not found/,
  },
  copilot: {
    e401: /Authentication failed with provider/,
    e500: /500 The server had an error/,
    nocreds: /Authentication failed with provider|No authentication information found/,
    unknownResume: /No session, task, or name matched/,
  },
  goose: {
    e401: /Authentication failed for .*401 Unauthorized/,
    e500: /Ran into this error: Server error.*500 Internal Server Error/,
    nocreds: /No provider configured/,
    unknownResume: /No session found with name 'headless-ses_[\w-]+'$/,
  },
};

/**
 * The tool event each CLI reports for the mock's file-writing call. The mock names the tool as
 * its protocol's best-known client does, so qwen and copilot (Chat Completions, like opencode)
 * are asked for a `write` tool they lack: they report the call failed, which is shown as such.
 */
const TOOL_EVENTS: Record<Exclude<Real, 'codex'>, { name: string; status: string }> = {
  claude: { name: 'Write', status: 'succeeded' },
  gemini: { name: 'write_file', status: 'succeeded' },
  opencode: { name: 'write', status: 'succeeded' },
  qwen: { name: 'write', status: 'failed' },
  copilot: { name: 'write', status: 'failed' },
  // goose's own `write` takes `path`, not opencode's `filePath`.
  goose: { name: 'write', status: 'failed' },
};

/** The CLIs whose file-writing call the mock names in their own vocabulary, so the file is really written. */
const WRITES: readonly Real[] = ['claude', 'gemini', 'opencode'];

describe.each(REAL)('%s (the real CLI) through the daemon', (agent) => {
  const reasons = REASONS[agent];

  it('runs to succeeded, captures its session id, and a resume carries the earlier turns', async () => {
    const first = await run('ok', { agent, prompt: `Remember the word ALPHA-${agent}.`, wait: true });
    expect(first).toMatchObject({ status: 'succeeded', exitCode: 0, agent });
    expect(first.output.stdout).toMatch(/MOCK REPLY/);
    expect(first.lastMessage).toMatch(/^MOCK REPLY \d+$/);
    if (agent !== 'copilot') expect(first.usage.outputTokens).toBeGreaterThanOrEqual(7);
    expect(await session(first.resumeId)).toMatchObject({ resumable: true, runCount: 1 });
    // Its timeline, built from what the real CLI printed.
    const timeline = (await (await api(daemon, 'GET', `/api/headless/${first.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    const types = timeline.events.map((e) => e.type);
    expect(types[0]).toBe('run.started');
    expect(types).toContain('agent.session');
    expect(timeline.events.find((e) => e.type === 'message')?.data.text).toBe(first.lastMessage);
    if (agent !== 'copilot') expect(types).toContain('usage');
    expect(types.at(-1)).toBe('run.ended');

    const before = mock.requests.length;
    const again = await run('ok', { resumeId: first.resumeId, prompt: `Which word? BETA-${agent}` });
    expect(again).toMatchObject({ status: 'succeeded', resumeId: first.resumeId });
    const resumed = requestsSince(before).filter((body) => body.includes(`BETA-${agent}`));
    expect(resumed.length).toBeGreaterThan(0);
    // The mock saw the first turn again: the CLI really resumed its own session.
    expect(resumed.some((body) => body.includes(`ALPHA-${agent}`))).toBe(true);
  });

  // The mock's apply_patch call is not one codex 0.169 runs; codex's tool items are held to their documented shape in transcripts.test.ts.
  it.skipIf(agent === 'codex')('a tool call the model asks for shows in the timeline as a tool event, by name, without its input', async () => {
    const record = await run('ok', { agent, prompt: `WRITE_FILE tool-${agent}.txt`, wait: true });
    expect(record.status).toBe('succeeded');
    const timeline = (await (await api(daemon, 'GET', `/api/headless/${record.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    const tools = timeline.events.filter((e) => e.type === 'tool').map((e) => e.data);
    expect(tools.at(-1), JSON.stringify(timeline.events)).toMatchObject(TOOL_EVENTS[agent as Exclude<Real, 'codex'>]);
    expect(JSON.stringify(tools)).not.toContain(`tool-${agent}.txt`);
  });

  it.skipIf(!hasBwrap)('runs in a sandbox: succeeded, its file written in its workspace, and a resume carries the earlier turns', async () => {
    const first = await run('box', { agent, prompt: `Remember the word GAMMA-${agent}.`, wait: true });
    expect(first).toMatchObject({ status: 'succeeded', policy: { permissions: 'full', sandbox: true } });
    expect(first.lastMessage).toMatch(/^MOCK REPLY \d+$/);
    if (WRITES.includes(agent)) {
      expect((await run('box', { agent, prompt: `WRITE_FILE box-${agent}.txt`, wait: true })).status).toBe('succeeded');
      expect(existsSync(join(paths.box, `box-${agent}.txt`))).toBe(true);
    }
    const before = mock.requests.length;
    const again = await run('box', { resumeId: first.resumeId, prompt: `Which word? DELTA-${agent}` });
    expect(again.status).toBe('succeeded');
    expect(requestsSince(before).some((body) => body.includes(`DELTA-${agent}`) && body.includes(`GAMMA-${agent}`))).toBe(true);
  });

  it('read-only: its read-only flags are accepted, and a file the model asks it to write is not written', async () => {
    const plain = await run('ro', { agent, prompt: 'hello', wait: true });
    expect(plain).toMatchObject({ status: 'succeeded', policy: { permissions: 'read-only', sandbox: false } });
    if (!WRITES.includes(agent)) return;
    const record = await run('ro', { agent, prompt: `WRITE_FILE ro-${agent}.txt`, wait: true });
    expect(record.status, JSON.stringify(record)).toBe('succeeded');
    expect(existsSync(join(paths.ro, `ro-${agent}.txt`))).toBe(false);
    // The same call in a full workspace writes it: the difference is the policy.
    expect((await run('ok', { agent, prompt: `WRITE_FILE full-${agent}.txt`, wait: true })).status).toBe('succeeded');
    expect(existsSync(join(paths.ok, `full-${agent}.txt`))).toBe(true);
  });

  it('a refused model call (401) is failed, with the agent’s reason, and its Session is not resumable', async () => {
    const record = await run('e401', { agent, prompt: 'hello', wait: true });
    expect(record.status).toBe('failed');
    expect(record.error.message).toMatch(reasons.e401);
    expect(await session(record.resumeId)).toMatchObject({ resumable: false });
  });

  // qwen 0.15 retries a 500 seven times with backoff from 5 s and offers no setting to shorten it.
  it.skipIf(agent === 'qwen')('a failing model (500) is failed, with the agent’s reason', async () => {
    const record = await run('e500', { agent, prompt: 'hello', wait: true });
    expect(record.status).toBe('failed');
    expect(record.error.message).toMatch(reasons.e500);
  });

  it('no credentials: failed at once, saying so', async () => {
    const record = await run('nocreds', { agent, prompt: 'hello', wait: true });
    expect(record.status).toBe('failed');
    expect(record.error.message).toMatch(reasons.nocreds);
    expect(record.durationMs).toBeLessThan(60_000);
  });

  it('a session the CLI no longer knows: the resume is failed with its reason', async () => {
    const first = await run('wipe', { agent, prompt: 'hello', wait: true });
    expect(first.status).toBe('succeeded');
    rmSync(homes.wipe, { recursive: true, force: true });
    writeHome(homes.wipe, mock.url);
    const again = await run('wipe', { resumeId: first.resumeId, prompt: 'again' });
    expect(again.status).toBe('failed');
    expect(again.error.message).toMatch(reasons.unknownResume);
  });
});

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
    const before = mock.requests.length;
    const record = await run('e401', { agent: 'amp', prompt: 'hello', wait: true });
    expect(record).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(record.error.message).toMatch(/Invalid or missing API key/);
    expect(mock.requests.slice(before).some((r) => r.protocol === 'amp' && r.key === 'mock-401')).toBe(true);
    expect(await session(record.resumeId)).toMatchObject({ resumable: false });
  });

  it('a failing service (500) is failed with amp’s reason', async () => {
    const record = await run('e500', { agent: 'amp', prompt: 'hello', wait: true });
    expect(record).toMatchObject({ status: 'failed', exitCode: 1 });
    expect(record.error.message).toMatch(/Amp server returned an error/);
  });

  it('no credentials: refused at once with spawn_failed (amp would wait at a login prompt)', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/nocreds/headless', { agent: 'amp', prompt: 'hello', wait: true });
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
    const res = await api(daemon, 'POST', '/api/workspaces/bare/headless', { agent: 'codex', prompt: 'hello', wait: true });
    const body = (await res.json()) as Record<string, any>;
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ code: 'spawn_failed' });
    expect(body.detail).toMatch(/codex: it has no credentials.*set OPENAI_API_KEY/);
    expect(await waitRun(daemon, body.taskId)).toMatchObject({ status: 'failed', error: { code: 'spawn_failed' } });
  });
});

describe('the working directory of a run', () => {
  it('opencode writes where PWD says: every run gets PWD = the workspace, so its file lands there', async () => {
    const record = await run('ok', { agent: 'opencode', prompt: 'WRITE_FILE pwd-check.txt', wait: true });
    expect(record.status).toBe('succeeded');
    expect(existsSync(join(paths.ok, 'pwd-check.txt'))).toBe(true);
    expect(existsSync(join(daemon.dir, 'pwd-check.txt'))).toBe(false);
    // The real tool call is in the timeline: its name and how it ended, never its input.
    const timeline = (await (await api(daemon, 'GET', `/api/headless/${record.taskId}/events?format=json`)).json()) as {
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
      daemon,
      'POST',
      '/api/workspaces/ok/headless',
      { agent: 'claude', prompt: 'WRITE_FILE traced.txt', wait: true, timeoutMs: 600_000 },
      { traceparent: `00-${traceId}-${parent}-01` },
    );
    const record = (await res.json()) as Record<string, any>;
    expect(record.status).toBe('succeeded');
    const run = () => otlp.spans.find((s) => s.attributes['headless.task_id'] === record.taskId);
    await waitFor(() => run() !== undefined, { what: 'the run’s span' });
    expect(run()).toMatchObject({
      name: 'invoke_agent claude',
      traceId,
      parentSpanId: parent,
      attributes: { 'gen_ai.usage.output_tokens': expect.any(Number) },
    });
    const tools = otlp.spans.filter((s) => s.parentSpanId === run()!.spanId);
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
    const events = (await (await api(daemon, 'GET', `/api/headless/${done.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    expect(events.events.some((e) => e.type === 'message' && /the service asks again: .*\/answer must be string/.test(e.data.text))).toBe(true);
  });

  it('gemini (no structured output of its own): answers through headless-inbox result, is refused, is asked again, and its second answer ends the run', async () => {
    const done = await run('ok', { agent: 'gemini', prompt: 'STRUCTURED {"answer":42} THEN {"answer":"forty-two"}', outputSchema: schema });
    expect(done, JSON.stringify(done)).toMatchObject({ status: 'succeeded', result: { answer: 'forty-two' } });
    const events = (await (await api(daemon, 'GET', `/api/headless/${done.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    // Two answers through its shell tool: the one refused, then the one that ended the run.
    expect(events.events.filter((e) => e.type === 'tool' && e.data.status === 'started')).toHaveLength(2);
    expect(events.events.some((e) => e.type === 'message' && /the service asks again: the agent gave no structured answer/.test(e.data.text))).toBe(true);
  });

  it('an answer that still does not match after its repair turn: failed, output_invalid, naming what does not match', async () => {
    const done = await run('ok', { agent: 'codex', prompt: 'STRUCTURED {"answer":42}', outputSchema: schema });
    expect(done).toMatchObject({ status: 'failed', error: { code: 'output_invalid', message: expect.stringContaining('/answer must be string') } });
    expect(done).not.toHaveProperty('result');
  });
});

describe.each(ACP)('%s: the real CLI over the Agent Client Protocol', (agent) => {
  it('runs to succeeded with the same reply as through its stdout, its session id captured; a resume loads that session (gemini: not resumable over ACP)', async () => {
    const first = await run('ok', { agent, prompt: `Remember the word ALPHA-${agent}.`, wait: true });
    expect(first, JSON.stringify(first)).toMatchObject({ status: 'succeeded', exitCode: 0, agent });
    expect(first.lastMessage).toMatch(/^MOCK REPLY \d+$/);
    const resumes = agent !== 'gemini-acp';
    expect(await session(first.resumeId)).toMatchObject({ resumable: resumes, runCount: 1 });
    const timeline = (await (await api(daemon, 'GET', `/api/headless/${first.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: any }>;
    };
    expect(timeline.events.map((e) => e.type).filter((t) => t !== 'usage')).toEqual(['run.started', 'agent.session', 'message', 'run.ended']);
    expect(timeline.events.find((e) => e.type === 'message')?.data.text).toBe(first.lastMessage);
    if (!resumes) return;

    const before = mock.requests.length;
    const again = await run('ok', { agent, resumeId: first.resumeId, prompt: `Which word? BETA-${agent}` });
    expect(again, JSON.stringify(again)).toMatchObject({ status: 'succeeded', resumeId: first.resumeId });
    const resumed = requestsSince(before).filter((body) => body.includes(`BETA-${agent}`));
    expect(resumed.some((body) => body.includes(`ALPHA-${agent}`))).toBe(true);
  });
});

describe.each(['claude', 'gemini-acp'] as const)('%s asks before it writes (docs/approvals.md): the real CLI, answered through the API', (agent) => {
  /** Starts a run that asks to write `file`, and waits for its question. */
  async function asking(mode: 'ask' | 'askfast', file: string): Promise<{ taskId: string; question: Record<string, any> }> {
    const res = await api(daemon, 'POST', `/api/workspaces/${mode}/headless`, { agent, prompt: `WRITE_FILE ${file}`, timeoutMs: 600_000 });
    const { taskId } = (await res.json()) as { taskId: string };
    let question: Record<string, any> | undefined;
    await waitFor(
      async () => {
        const list = (await (await api(daemon, 'GET', `/api/approvals?taskId=${taskId}`)).json()) as { approvals: Array<Record<string, any>> };
        question = list.approvals[0];
        return question !== undefined;
      },
      { what: `${agent}'s question`, timeoutMs: 300_000 },
    );
    return { taskId, question: question! };
  }

  it('allowed: it writes its file; denied: it does not, and the run goes on to succeed', async () => {
    const allowed = await asking('ask', `ask-${agent}.txt`);
    expect(allowed.question).toMatchObject({ status: 'pending', tool: { kind: 'edit', paths: [expect.stringContaining(`ask-${agent}.txt`)] } });
    expect(existsSync(join(paths.ask, `ask-${agent}.txt`))).toBe(false);
    expect((await api(daemon, 'POST', `/api/approvals/${allowed.question.id}`, { decision: 'allow' })).status).toBe(200);
    expect(await waitRun(daemon, allowed.taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { asked: 1, allowed: 1 } });
    expect(existsSync(join(paths.ask, `ask-${agent}.txt`))).toBe(true);

    const denied = await asking('ask', `deny-${agent}.txt`);
    expect((await api(daemon, 'POST', `/api/approvals/${denied.question.id}`, { decision: 'deny' })).status).toBe(200);
    expect(await waitRun(daemon, denied.taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { denied: 1 } });
    expect(existsSync(join(paths.ask, `deny-${agent}.txt`))).toBe(false);
  });

  it('unanswered: its fallback (deny) answers it when its time runs out', async () => {
    const { taskId } = await asking('askfast', `late-${agent}.txt`);
    expect(await waitRun(daemon, taskId, 600_000)).toMatchObject({ status: 'succeeded', approvals: { denied: 1, timedOut: 1 } });
    expect(existsSync(join(paths.askfast, `late-${agent}.txt`))).toBe(false);
  });
});

// qwen retries a 500 for about a minute before it gives up, in either mode: its refusal is checked over stdout only.
it.each(['gemini-acp', 'opencode-acp'] as const)('%s: a refused model call fails the run over ACP', async (agent) => {
  const done = await run('e500', { agent, prompt: 'hello', wait: true });
  expect(done.status, JSON.stringify(done)).toBe('failed');
});
