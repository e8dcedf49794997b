import type { AgentAdapter, AgentOutputParser, AgentRunInput, AgentVerdict } from './types';

/**
 * The built-in adapters, one per real CLI, each with the flags that keep it from ever waiting
 * for a human and its machine-readable output; the README's agent table says what each does. The prompt never lands where it could be read as an option:
 * it goes on stdin, or glued to its option (`--prompt=<text>`), which parsers take whole.
 */

type Json = Record<string, unknown>;

function parseJson(line: string): Json | undefined {
  const text = line.trim();
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/** A parser over JSON lines: `onEvent` may report the session id and the final verdict. */
function jsonLinesParser(
  onEvent: (event: Json, state: { sessionId?: string; final?: AgentVerdict }) => void,
  noFinal: string,
): () => AgentOutputParser {
  return () => {
    const state: { sessionId?: string; final?: AgentVerdict } = {};
    return {
      line(line) {
        const event = parseJson(line);
        if (event) onEvent(event, state);
      },
      sessionId: () => state.sessionId,
      finish(exitCode) {
        const verdict: AgentVerdict = { agentSessionId: state.sessionId };
        if (state.final?.error) verdict.error = state.final.error;
        else if (!state.final && exitCode === 0) verdict.error = noFinal;
        return verdict;
      },
    };
  };
}

/**
 * Claude-style stream (Claude Code, Qwen Code, Cursor, Amp): `session_id` on events, a final
 * `type: "result"` whose `is_error` or non-success `subtype` means failure even after exit 0.
 */
const claudeStyleParser = jsonLinesParser((event, state) => {
  const id = str(event.session_id);
  if (id && !state.sessionId) state.sessionId = id;
  if (event.type === 'result') {
    const failed = event.is_error === true || (event.subtype !== undefined && event.subtype !== 'success');
    const message = str(event.result) ?? str((event.error as Json | undefined)?.message) ?? str(event.subtype) ?? 'error';
    state.final = failed ? { error: `agent reported failure: ${message}` } : {};
  }
}, 'the agent printed no final result event');

const resumeFlag = (flag: string, input: AgentRunInput): string[] =>
  input.agentSessionId === undefined ? [] : [flag, input.agentSessionId];

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

const claude: AgentAdapter = {
  name: 'claude',
  kind: 'agent',
  command: 'claude',
  supportsResume: true,
  invocation: (input) => ({
    command: 'claude',
    // stream-json requires --verbose in print mode; the prompt comes on stdin.
    args: ['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
    // As root, Claude Code refuses bypass mode unless it is told it runs in a sandbox.
    ...(asRoot ? { env: { IS_SANDBOX: '1' } } : {}),
  }),
  parser: claudeStyleParser,
};

const codex: AgentAdapter = {
  name: 'codex',
  kind: 'agent',
  command: 'codex',
  supportsResume: true,
  invocation: (input) => ({
    command: 'codex',
    // Every flag before `resume` (older parsers require it); `-` reads the prompt from stdin.
    args: [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--sandbox',
      'workspace-write',
      '--color',
      'never',
      ...(input.agentSessionId === undefined ? [] : ['resume', input.agentSessionId]),
      '-',
    ],
    stdin: input.prompt,
  }),
  parser: jsonLinesParser((event, state) => {
    if (event.type === 'thread.started') state.sessionId ??= str(event.thread_id);
    else if (event.type === 'turn.failed') {
      state.final = { error: `turn failed: ${str((event.error as Json | undefined)?.message) ?? 'unknown error'}` };
    } else if (event.type === 'error') state.final = { error: `error: ${str(event.message) ?? 'unknown error'}` };
    else if (event.type === 'turn.completed' && !state.final?.error) state.final = {};
  }, 'codex printed no turn.completed event'),
};

const gemini: AgentAdapter = {
  name: 'gemini',
  kind: 'agent',
  command: 'gemini',
  supportsResume: true,
  invocation: (input) => ({
    command: 'gemini',
    args: [
      `--prompt=${input.prompt}`,
      '--output-format',
      'stream-json',
      '--approval-mode',
      'yolo',
      '--skip-trust',
      ...resumeFlag('--resume', input),
    ],
  }),
  parser: jsonLinesParser((event, state) => {
    if (event.type === 'init') state.sessionId ??= str(event.session_id);
    if (event.type === 'result') {
      state.final =
        event.status === 'success'
          ? {}
          : { error: `agent reported failure: ${str((event.error as Json | undefined)?.message) ?? 'error'}` };
    }
  }, 'gemini printed no result event'),
};

const qwen: AgentAdapter = {
  name: 'qwen',
  kind: 'agent',
  command: 'qwen',
  supportsResume: true,
  invocation: (input) => ({
    command: 'qwen',
    args: [`--prompt=${input.prompt}`, '--output-format', 'stream-json', '--approval-mode', 'yolo', ...resumeFlag('--resume', input)],
  }),
  parser: claudeStyleParser,
};

const opencode: AgentAdapter = {
  name: 'opencode',
  kind: 'agent',
  command: 'opencode',
  supportsResume: true,
  invocation: (input) => ({
    command: 'opencode',
    // `run` reads the message from stdin when it is not a TTY. The permission variable is
    // the one auto-approve switch that has survived every flag rename.
    args: ['run', '--format', 'json', ...resumeFlag('--session', input)],
    stdin: input.prompt,
    env: { OPENCODE_PERMISSION: '{"*":"allow"}' },
  }),
  parser: jsonLinesParser((event, state) => {
    state.sessionId ??= str(event.sessionID);
    if (event.type === 'error') {
      const error = event.error as Json | undefined;
      state.final = { error: `agent reported failure: ${str((error?.data as Json | undefined)?.message) ?? str(error?.name) ?? 'error'}` };
    } else if (!state.final?.error) state.final = {};
  }, 'opencode printed no event'),
};

const cursor: AgentAdapter = {
  name: 'cursor',
  kind: 'agent',
  command: 'cursor-agent',
  supportsResume: true,
  invocation: (input) => ({
    command: 'cursor-agent',
    args: ['-p', '--output-format', 'stream-json', '--force', '--trust', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
};

const amp: AgentAdapter = {
  name: 'amp',
  kind: 'agent',
  command: 'amp',
  supportsResume: true,
  invocation: (input) => ({
    command: 'amp',
    args: [
      ...(input.agentSessionId === undefined ? [] : ['threads', 'continue', input.agentSessionId]),
      '--execute',
      '--stream-json',
      '--dangerously-allow-all',
    ],
    stdin: input.prompt,
    // With TERM set, amp writes terminal control sequences into its pipes.
    env: { TERM: 'dumb' },
  }),
  parser: claudeStyleParser,
};

const copilot: AgentAdapter = {
  name: 'copilot',
  kind: 'agent',
  command: 'copilot',
  supportsResume: true,
  invocation: (input) => ({
    command: 'copilot',
    args: [
      `--prompt=${input.prompt}`,
      '--allow-all',
      '--no-ask-user',
      '--output-format',
      'json',
      ...(input.agentSessionId === undefined ? [] : [`--resume=${input.agentSessionId}`]),
    ],
  }),
  parser: jsonLinesParser((event, state) => {
    if (event.type !== 'result') return;
    state.sessionId ??= str(event.sessionId);
    state.final = event.exitCode === 0 ? {} : { error: `agent reported exit code ${String(event.exitCode)}` };
  }, 'copilot printed no result event'),
};

/** Goose prints no session id, so the adapter names the session itself and resumes by name. */
const goose: AgentAdapter = {
  name: 'goose',
  kind: 'agent',
  command: 'goose',
  supportsResume: true,
  invocation: (input) => ({
    command: 'goose',
    args: [
      'run',
      ...(input.agentSessionId === undefined ? ['--name', `headless-${input.resumeId}`] : ['--resume', '--name', input.agentSessionId]),
      '--output-format',
      'stream-json',
      '--instructions',
      '-',
    ],
    stdin: input.prompt,
    env: { GOOSE_MODE: 'auto' },
  }),
  parser: (input) => {
    const inner = jsonLinesParser((event, state) => {
      if (event.type === 'error') state.final = { error: `agent reported failure: ${str(event.error) ?? 'error'}` };
      else if (event.type === 'complete' && !state.final?.error) state.final = {};
    }, 'goose printed no complete event')();
    const name = input.agentSessionId ?? `headless-${input.resumeId}`;
    return { line: inner.line, sessionId: () => name, finish: (exitCode) => ({ ...inner.finish(exitCode), agentSessionId: name }) };
  },
};

/** Exists so that naming it gives a clear 400: a shell has no model loop. */
const shell: AgentAdapter = {
  name: 'shell',
  kind: 'shell',
  command: 'sh',
  supportsResume: false,
  invocation: () => {
    throw new Error('the shell adapter never runs headless');
  },
  parser: () => ({ line: () => undefined, sessionId: () => undefined, finish: () => ({}) }),
};

/** In the README's order, which is also the last step of agent selection. */
export const BUILTIN_AGENTS: readonly AgentAdapter[] = [claude, codex, gemini, qwen, opencode, cursor, amp, copilot, goose, shell];
