import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentEvent } from '../../src/core/agents/types';
import { judgeOutcome } from '../../src/core/runs/outcome';

/**
 * The parsers judged on what the real CLIs printed (recorded by
 * test/fixtures/transcripts/record.mjs against the mock model), and the fake CLIs held to it.
 */

interface Recorded {
  sessionId: string | null;
  args: string[];
  exitCode: number;
  stdout: string[];
  stderr: string;
}
interface Transcript {
  cli: string;
  version: string;
  success: Recorded;
  /** Absent for cline, which cannot resume headless. */
  resume?: Recorded;
  refused: Recorded;
  unknownResume?: Recorded;
  /** goose and amp: a failing model or service (500). */
  failing?: Recorded;
  /** goose: no provider configured. */
  noProvider?: Recorded;
}

const REAL = ['claude', 'codex', 'gemini', 'qwen', 'opencode', 'copilot', 'goose', 'pi', 'cline'];
const DIR = resolve(__dirname, '../fixtures/transcripts');
const transcript = (cli: string): Transcript => JSON.parse(readFileSync(join(DIR, `${cli}.json`), 'utf8')) as Transcript;

function judge(cli: string, recorded: Recorded, resumeId?: string) {
  const adapter = BUILTIN_AGENTS.find((a) => a.name === cli)!;
  const parser = adapter.parser({ prompt: 'x', workspacePath: '/w', resumeId: 'ses_record', agentSessionId: resumeId, permissions: 'full' });
  const events: AgentEvent[] = [];
  for (const line of recorded.stdout) events.push(...(parser.line(line) ?? []));
  const verdict = parser.finish(recorded.exitCode);
  const outcome = judgeOutcome({ exitCode: recorded.exitCode, signal: null, agentError: verdict.error, stderr: recorded.stderr });
  return { verdict, outcome, events };
}

/** The reason each CLI gives, as the run record must carry it. */
const REFUSED: Record<string, RegExp> = {
  claude: /Invalid API key/,
  codex: /401 Unauthorized: Incorrect API key/,
  gemini: /API key not valid/,
  qwen: /API Error: 401/,
  opencode: /APIError: Incorrect API key/,
  copilot: /Authentication failed with provider/,
  goose: /Authentication failed for .*401 Unauthorized/,
  pi: /^401 Incorrect API key provided: mock-401$/,
  cline: /: Incorrect API key provided: mock-401$/,
};
const UNKNOWN_RESUME: Record<string, RegExp> = {
  claude: /No conversation found with session ID/,
  codex: /no rollout found for thread id/,
  gemini: /Error resuming session/,
  qwen: /No saved session found/,
  opencode: /Session not found/,
  copilot: /No session, task, or name matched/,
  goose: /^The agent exited with code 1: Error: No session found with name 'headless-ses_unknown'$/,
  pi: /No session found matching '00000000-0000-7000-8000-000000000000'/,
};

describe.each(REAL)('%s: the parser on the real CLI’s recorded output', (cli) => {
  const t = transcript(cli);

  it('a success: succeeded, answered, the session id captured, its last message and usage', () => {
    const { verdict, outcome } = judge(cli, t.success);
    expect(outcome).toEqual({ status: 'succeeded' });
    expect(verdict.answered).toBe(true);
    expect(verdict.agentSessionId ?? null).toBe(t.success.sessionId);
    expect(verdict.lastMessage).toMatch(/^MOCK REPLY \d+$/);
    // The mock reports 12 input and 7 output tokens per call; copilot prints no token counts.
    if (cli === 'copilot') expect(verdict.usage).toBeUndefined();
    else expect(verdict.usage).toMatchObject({ inputTokens: expect.any(Number), outputTokens: expect.any(Number) });
    if (cli !== 'copilot') expect(verdict.usage!.inputTokens).toBeGreaterThanOrEqual(12);
  });

  it('a success: its timeline has the reply as a message, and the usage where reported', () => {
    const { verdict, events } = judge(cli, t.success);
    expect(events.filter((e) => e.type === 'message')).toEqual([{ type: 'message', text: verdict.lastMessage }]);
    expect(events.some((e) => e.type === 'error')).toBe(false);
    const usage = events.filter((e) => e.type === 'usage');
    if (cli === 'copilot') expect(usage).toEqual([]);
    else expect(usage.at(-1)).toEqual({ type: 'usage', usage: verdict.usage });
  });

  it('a refused model call: its timeline has an error event and no message', () => {
    const { events } = judge(cli, t.refused);
    expect(events.some((e) => e.type === 'message')).toBe(false);
    expect(events.filter((e) => e.type === 'error').length).toBeGreaterThan(0);
  });

  it.skipIf(t.resume === undefined)('a resume: succeeded on the same session', () => {
    const { verdict, outcome } = judge(cli, t.resume!, t.success.sessionId!);
    expect(outcome.status).toBe('succeeded');
    expect(verdict.agentSessionId).toBe(t.success.sessionId);
  });

  it('a refused model call (401): failed with the agent’s reason, never answered', () => {
    const { verdict, outcome } = judge(cli, t.refused);
    expect(outcome.status).toBe('failed');
    expect(outcome.error!.message).toMatch(REFUSED[cli]!);
    expect(verdict.answered).toBe(false);
  });

  it.skipIf(t.unknownResume === undefined)('an unknown session: failed with the agent’s reason', () => {
    const { outcome } = judge(cli, t.unknownResume!, t.unknownResume!.sessionId!);
    expect(outcome.status).toBe('failed');
    expect(outcome.error!.message).toMatch(UNKNOWN_RESUME[cli]!);
  });
});

describe('tool calls in each agent’s documented shape become tool events, without their input', () => {
  const events = (cli: string, lines: unknown[]) => {
    const parser = BUILTIN_AGENTS.find((a) => a.name === cli)!.parser({ prompt: 'x', workspacePath: '/w', resumeId: 'ses_1', permissions: 'full' });
    return lines.flatMap((l) => parser.line(JSON.stringify(l)) ?? []).filter((e) => e.type === 'tool');
  };
  const tool = (name: string, status: string, id?: string) => ({ type: 'tool', name, status, ...(id ? { id } : {}) });

  it.each([
    [
      'claude',
      [
        { type: 'assistant', message: { content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'secret' } }] } },
        { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't1', is_error: true }] } },
      ],
      [tool('Bash', 'started', 't1'), tool('Bash', 'failed', 't1')],
    ],
    [
      'codex',
      [
        { type: 'item.started', item: { id: 'i1', type: 'command_execution', command: 'ls', status: 'in_progress' } },
        { type: 'item.completed', item: { id: 'i1', type: 'command_execution', command: 'ls', exit_code: 0, status: 'completed' } },
        { type: 'item.completed', item: { id: 'i2', type: 'mcp_tool_call', tool: 'search', status: 'failed' } },
      ],
      [tool('command_execution', 'started', 'i1'), tool('command_execution', 'succeeded', 'i1'), tool('search', 'failed', 'i2')],
    ],
    [
      'gemini',
      [
        { type: 'tool_use', tool_name: 'read_file', tool_id: 'g1', parameters: { path: '/etc/passwd' } },
        { type: 'tool_result', tool_id: 'g1', status: 'success', output: 'x' },
      ],
      [tool('read_file', 'started', 'g1'), tool('read_file', 'succeeded', 'g1')],
    ],
    [
      'opencode',
      [{ type: 'tool_use', sessionID: 's', part: { callID: 'c1', tool: 'write', state: { status: 'completed', input: { content: 'x' } } } }],
      [tool('write', 'succeeded', 'c1')],
    ],
    [
      'copilot',
      [
        { type: 'tool.execution_start', data: { toolCallId: 'k1', toolName: 'bash', arguments: { command: 'ls' } } },
        { type: 'tool.execution_complete', data: { toolCallId: 'k1', success: true } },
      ],
      [tool('bash', 'started', 'k1'), tool('bash', 'succeeded', 'k1')],
    ],
    [
      'goose',
      [
        {
          type: 'message',
          message: {
            role: 'assistant',
            content: [{ type: 'toolRequest', id: 'c1', toolCall: { status: 'success', value: { name: 'shell', arguments: { command: 'ls' } } } }],
          },
        },
        {
          type: 'message',
          message: { role: 'user', content: [{ type: 'toolResponse', id: 'c1', toolResult: { status: 'success', value: { content: [], isError: true } } }] },
        },
      ],
      [tool('shell', 'started', 'c1'), tool('shell', 'failed', 'c1')],
    ],
    [
      'pi',
      [
        { type: 'tool_execution_start', toolCallId: 't1', toolName: 'bash', args: { command: 'ls' } },
        { type: 'tool_execution_end', toolCallId: 't1', toolName: 'bash', result: { content: [] }, isError: false },
        { type: 'tool_execution_start', toolCallId: 't2', toolName: 'write', args: { path: 'secret', content: 'passwd' } },
        { type: 'tool_execution_end', toolCallId: 't2', toolName: 'write', result: { content: [] }, isError: true },
      ],
      [tool('bash', 'started', 't1'), tool('bash', 'succeeded', 't1'), tool('write', 'started', 't2'), tool('write', 'failed', 't2')],
    ],
    [
      'cline',
      [
        { type: 'agent_event', event: { type: 'content_start', contentType: 'tool', toolName: 'editor', toolCallId: 'c1', input: { path: 'secret' } } },
        { type: 'agent_event', event: { type: 'content_end', contentType: 'tool', toolName: 'editor', toolCallId: 'c1', output: { success: true } } },
        { type: 'agent_event', event: { type: 'content_start', contentType: 'tool', toolName: 'run_commands', toolCallId: 'c2', input: { commands: ['ls'] } } },
        {
          type: 'agent_event',
          event: { type: 'content_end', contentType: 'tool', toolName: 'run_commands', toolCallId: 'c2', output: { error: 'requires approval' } },
        },
      ],
      [tool('editor', 'started', 'c1'), tool('editor', 'succeeded', 'c1'), tool('run_commands', 'started', 'c2'), tool('run_commands', 'failed', 'c2')],
    ],
    [
      'cursor',
      [
        { type: 'tool_call', subtype: 'started', call_id: 'u1', tool_call: { shellToolCall: { args: { command: 'ls' } } } },
        { type: 'tool_call', subtype: 'completed', call_id: 'u1', tool_call: { shellToolCall: { args: {}, result: {} } } },
      ],
      [tool('shell', 'started', 'u1'), tool('shell', 'succeeded', 'u1')],
    ],
  ])('%s', (cli, lines, expected) => {
    const got = events(cli, lines);
    expect(got).toEqual(expected);
    expect(JSON.stringify(got)).not.toMatch(/secret|passwd|"command"|"ls"/);
  });
});

describe('what the transcripts showed, beyond them', () => {
  const parse = (cli: string, events: unknown[], exitCode: number) => {
    const parser = BUILTIN_AGENTS.find((a) => a.name === cli)!.parser({ prompt: 'x', workspacePath: '/w', resumeId: 'ses_1', permissions: 'full' });
    for (const e of events) parser.line(JSON.stringify(e));
    return parser.finish(exitCode);
  };

  it('codex: "Reconnecting..." error events while it retries do not fail a turn that then completes', () => {
    const verdict = parse(
      'codex',
      [
        { type: 'thread.started', thread_id: 't-1' },
        { type: 'turn.started' },
        { type: 'error', message: 'Reconnecting... 1/5 (stream disconnected before completion)' },
        { type: 'item.completed', item: { id: 'item_1', type: 'agent_message', text: 'done' } },
        { type: 'turn.completed', usage: {} },
      ],
      0,
    );
    expect(verdict).toEqual({ agentSessionId: 't-1', answered: true, lastMessage: 'done' });
  });

  it('codex: a run that ends with exit 1 after retries names the last error', () => {
    const verdict = parse(
      'codex',
      [
        { type: 'thread.started', thread_id: 't-1' },
        { type: 'error', message: 'Reconnecting... 5/5 (connection refused)' },
      ],
      1,
    );
    expect(verdict.error).toContain('connection refused');
  });

  it('goose: a failing model (500) is a reply from goose itself with exit 0: failed with its reason, never answered', () => {
    const { verdict, outcome, events } = judge('goose', transcript('goose').failing!);
    expect(outcome.status).toBe('failed');
    expect(outcome.error!.message).toMatch(/^Ran into this error: Server error.*500 Internal Server Error/);
    expect(verdict.answered).toBe(false);
    expect(events.some((e) => e.type === 'message')).toBe(false);
  });

  it('goose: with no provider configured, the reason it prints on stdout as text is the run’s', () => {
    const { outcome } = judge('goose', transcript('goose').noProvider!);
    expect(outcome.error!.message).toBe("The agent exited with code 1: No provider configured. Run 'goose configure' first.");
  });

  it.each([
    ['refused', /Invalid or missing API key/],
    ['failing', /Amp server returned an error/],
  ] as const)('amp: its service %s: failed with the reason it printed', (name, reason) => {
    const { verdict, outcome } = judge('amp', transcript('amp')[name]!);
    expect(outcome.status).toBe('failed');
    expect(outcome.error!.message).toMatch(reason);
    expect(verdict.answered).toBe(false);
  });

  it('claude-style: an error_during_execution result carries errors[] as the reason', () => {
    const verdict = parse('claude', [{ type: 'result', subtype: 'error_during_execution', is_error: true, errors: ['first', 'second'] }], 1);
    expect(verdict.error).toBe('first; second');
  });
});

const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
const state = mkdtempSync(join(tmpdir(), 'hrw-fakes-'));
afterAll(() => rmSync(state, { recursive: true, force: true }));

/** The kind of an event: its type, and subtype where it has one. */
const kind = (event: Record<string, unknown>) => `${String(event.type)}${event.subtype === undefined ? '' : `/${String(event.subtype)}`}`;

describe.each(REAL)('%s: the fake CLI matches the real one', (cli) => {
  const t = transcript(cli);
  const realKinds = new Map<string, Set<string>>();
  for (const recorded of [t.success, t.resume, t.refused, t.unknownResume].filter((r) => r !== undefined)) {
    for (const line of recorded.stdout) {
      const event = JSON.parse(line) as Record<string, unknown>;
      const keys = realKinds.get(kind(event)) ?? new Set<string>();
      for (const key of Object.keys(event)) keys.add(key);
      realKinds.set(kind(event), keys);
    }
  }

  it.each([
    ['a success', 'hello', 0],
    ['a refused call', 'please FAIL', t.refused.exitCode],
  ])('%s: only event kinds and keys the real CLI prints, and its exit code', (_case, prompt, exitCode) => {
    // The prompt where the adapter puts it: glued to its option, after `--` (cline), or on stdin.
    const args = t.success.args.map((a, i, all) => (a.startsWith('--prompt=') ? `--prompt=${prompt}` : all[i - 1] === '--' ? `${prompt}\n` : a));
    const r = spawnSync(join(FAKE_BIN, cli), args, { input: prompt, encoding: 'utf8', env: { ...process.env, FAKE_CLI_STATE: state, IS_SANDBOX: '1' } });
    expect(r.status).toBe(exitCode);
    const events = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.length).toBeGreaterThan(0);
    for (const event of events) {
      const keys = realKinds.get(kind(event));
      expect(keys, `${kind(event)} is not an event the real ${cli} prints`).toBeDefined();
      for (const key of Object.keys(event)) expect(keys!.has(key), `${kind(event)}.${key}`).toBe(true);
    }
  });

  it('answers --version as the real CLI does', () => {
    expect(spawnSync(join(FAKE_BIN, cli), ['--version'], { encoding: 'utf8' }).stdout.trim()).toBe(t.version);
  });
});

describe('usage and the last message, beyond the transcripts', () => {
  const parse = (cli: string, events: unknown[]) => {
    const parser = BUILTIN_AGENTS.find((a) => a.name === cli)!.parser({ prompt: 'x', workspacePath: '/w', resumeId: 'ses_1', permissions: 'full' });
    for (const e of events) parser.line(JSON.stringify(e));
    return parser.finish(0);
  };

  it('gemini: streamed deltas make one message; a new turn starts another', () => {
    const assistant = (content: string) => ({ type: 'message', role: 'assistant', content, delta: true });
    const verdict = parse('gemini', [
      assistant('Looking'),
      assistant(' around.'),
      { type: 'tool_use', tool_name: 'ls' },
      assistant('Done: '),
      assistant('3 files.'),
      { type: 'result', status: 'success', stats: { input_tokens: 30, output_tokens: 9 } },
    ]);
    expect(verdict.lastMessage).toBe('Done: 3 files.');
    expect(verdict.usage).toEqual({ inputTokens: 30, outputTokens: 9 });
  });

  it('opencode: usage and cost add up over its steps', () => {
    const step = (input: number, output: number, cost: number) => ({ type: 'step_finish', sessionID: 's', part: { tokens: { input, output }, cost } });
    const verdict = parse('opencode', [
      { type: 'text', sessionID: 's', part: { text: 'one' } },
      step(10, 2, 0.5),
      { type: 'text', sessionID: 's', part: { text: 'two' } },
      step(20, 3, 0.25),
    ]);
    expect(verdict).toMatchObject({ lastMessage: 'two', usage: { inputTokens: 30, outputTokens: 5, costUsd: 0.75 } });
  });
});
