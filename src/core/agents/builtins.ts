import type { RunUsage } from '../../contract/records';
import type { AgentAdapter, AgentEvent, AgentInvocation, AgentOutputParser, AgentRunInput, AgentVerdict } from './types';

/**
 * The built-in adapters, one per real CLI, each with the flags that keep it from ever waiting
 * for a human and its machine-readable output; the README's agent table says what each does and
 * which versions the test suite runs. The prompt never lands where it could be read as an
 * option: it goes on stdin, or glued to its option (`--prompt=<text>`), which parsers take whole.
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
const obj = (value: unknown): Json | undefined => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined);

/** What a parser has learnt from the events so far. */
interface ParseState {
  sessionId?: string;
  /** The final verdict: `{}` for success, `{ error }` for a failure. Absent until a final event. */
  final?: { error?: string };
  /** The latest error the agent reported on the way (retries included); used if it then fails without saying why. */
  lastError?: string;
  /** Set once the model answered (text or a tool call), never for an error shown as a message. */
  answered?: boolean;
  usage?: RunUsage;
  lastMessage?: string;
  /** Gemini: the last event was an assistant delta, so the next one continues its message. */
  continues?: boolean;
  /** Tool names by call id, for results that name only the id. */
  tools?: Map<string, string>;
}

type Emit = (event: AgentEvent) => void;

/** Remembers a started tool call, for its result, which may name only its id. */
function toolStarted(state: ParseState, emit: Emit, name: string | undefined, id: string | undefined): void {
  const tool = name ?? 'tool';
  if (id !== undefined) {
    state.tools ??= new Map();
    state.tools.set(id, tool);
  }
  emit({ type: 'tool', name: tool, status: 'started', ...(id === undefined ? {} : { id }) });
}

function toolEnded(state: ParseState, emit: Emit, id: string | undefined, failed: boolean, name?: string): void {
  const tool = name ?? (id === undefined ? undefined : state.tools?.get(id)) ?? 'tool';
  if (id !== undefined) state.tools?.delete(id);
  emit({ type: 'tool', name: tool, status: failed ? 'failed' : 'succeeded', ...(id === undefined ? {} : { id }) });
}

const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** Usage from token counts as the agent names them; undefined when it gave none. */
function usageOf(input: unknown, output: unknown, cost?: unknown): RunUsage | undefined {
  const inputTokens = num(input);
  const outputTokens = num(output);
  if (inputTokens === undefined && outputTokens === undefined) return undefined;
  const costUsd = num(cost);
  return { inputTokens: inputTokens ?? 0, outputTokens: outputTokens ?? 0, ...(costUsd === undefined ? {} : { costUsd }) };
}

/** Adds a step's usage to the run's (opencode reports one per step). */
function addUsage(total: RunUsage | undefined, step: RunUsage | undefined): RunUsage | undefined {
  if (!step) return total;
  if (!total) return step;
  const costUsd = total.costUsd === undefined && step.costUsd === undefined ? undefined : (total.costUsd ?? 0) + (step.costUsd ?? 0);
  return {
    inputTokens: total.inputTokens + step.inputTokens,
    outputTokens: total.outputTokens + step.outputTokens,
    ...(costUsd === undefined ? {} : { costUsd }),
  };
}

interface ParserSpec {
  /** Learns from one event, and emits what it meant for the run's timeline. */
  onEvent(event: Json, state: ParseState, emit: Emit): void;
  /** The failure when the process exited 0 but printed no final event; absent: exit 0 is enough. */
  noFinal?: string;
}

/** A parser over JSON lines; the verdict combines the final event with the exit code. */
function jsonLinesParser(spec: ParserSpec): () => AgentOutputParser {
  return () => {
    const state: ParseState = {};
    return {
      line(line) {
        const event = parseJson(line);
        if (!event) return [];
        const events: AgentEvent[] = [];
        spec.onEvent(event, state, (e) => events.push(e));
        return events;
      },
      sessionId: () => state.sessionId,
      finish(exitCode) {
        const verdict: AgentVerdict = { agentSessionId: state.sessionId, answered: state.answered === true };
        if (state.usage) verdict.usage = state.usage;
        if (state.lastMessage) verdict.lastMessage = state.lastMessage;
        const error = state.final?.error ?? (exitCode !== 0 ? state.lastError : undefined);
        if (error) verdict.error = error;
        else if (!state.final && exitCode === 0 && spec.noFinal) verdict.error = spec.noFinal;
        return verdict;
      },
    };
  };
}

/** Qwen Code reports a failed model call as a successful result whose text is the error. */
const API_ERROR_TEXT = /^\[API Error/;

/** The content blocks of a Claude-style message. */
const blocksOf = (event: Json): Json[] =>
  (Array.isArray(obj(event.message)?.content) ? (obj(event.message)!.content as unknown[]) : []).map(obj).filter((b): b is Json => b !== undefined);

/** The text blocks of a Claude-style assistant message. */
const assistantText = (event: Json): string =>
  blocksOf(event)
    .map((block) => str(block.text) ?? (block.type === 'tool_use' ? 'tool_use' : ''))
    .join('');

/**
 * Claude-style stream (Claude Code, Qwen Code, Cursor, Amp): `session_id` on events, assistant
 * messages (an `error` on one marks a failed model call), and a final `type: "result"` whose
 * `is_error`, non-success `subtype` or API-error text means failure even after exit 0.
 */
const claudeStyleParser = jsonLinesParser({
  onEvent(event, state, emit) {
    state.sessionId ??= str(event.session_id);
    if (event.type === 'assistant') {
      const text = assistantText(event);
      if (event.error === undefined && text !== '' && !API_ERROR_TEXT.test(text)) {
        state.answered = true;
        if (text !== 'tool_use') state.lastMessage = text;
        for (const block of blocksOf(event)) {
          if (block.type === 'text' && str(block.text)) emit({ type: 'message', text: block.text as string });
          else if (block.type === 'tool_use') toolStarted(state, emit, str(block.name), str(block.id));
        }
      } else if (text !== '' && text !== 'tool_use') emit({ type: 'error', message: text });
    } else if (event.type === 'user') {
      for (const block of blocksOf(event)) {
        if (block.type === 'tool_result') toolEnded(state, emit, str(block.tool_use_id), block.is_error === true);
      }
    } else if (event.type === 'tool_call') {
      // Cursor: its own tool events, named by the one key of `tool_call` (e.g. shellToolCall).
      const name = Object.keys(obj(event.tool_call) ?? {})[0]?.replace(/ToolCall$/, '');
      if (event.subtype === 'started') toolStarted(state, emit, name, str(event.call_id));
      else if (event.subtype === 'completed') toolEnded(state, emit, str(event.call_id), false, name);
    } else if (event.type === 'result') {
      const usage = obj(event.usage);
      state.usage = usageOf(usage?.input_tokens, usage?.output_tokens, event.total_cost_usd) ?? state.usage;
      if (state.usage) emit({ type: 'usage', usage: state.usage });
      const text = str(event.result);
      const errors = Array.isArray(event.errors) ? event.errors.filter((e): e is string => typeof e === 'string') : [];
      const failed =
        event.is_error === true || (event.subtype !== undefined && event.subtype !== 'success') || (text !== undefined && API_ERROR_TEXT.test(text));
      const reason = (errors.length > 0 ? errors.join('; ') : undefined) ?? text ?? str(obj(event.error)?.message) ?? str(event.subtype) ?? 'error';
      state.final = failed ? { error: reason } : {};
      if (failed) emit({ type: 'error', message: reason });
      if (!failed && text) state.lastMessage = text;
    }
  },
  noFinal: 'the agent printed no final result event',
});

const resumeFlag = (flag: string, input: AgentRunInput): string[] => (input.agentSessionId === undefined ? [] : [flag, input.agentSessionId]);

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

type AdapterSpec = Omit<AgentAdapter, 'name' | 'kind' | 'supportsResume' | 'invocation' | 'command'> & {
  /** @default the agent's name */
  command?: string;
  /** The invocation without its command, which is always the adapter's. */
  run(input: AgentRunInput): Omit<AgentInvocation, 'command'>;
};

/** A headless-capable agent that can resume; its usage is `--help` unless said otherwise. */
function agent(name: string, { run, command = name, ...spec }: AdapterSpec): AgentAdapter {
  return { name, command, kind: 'agent', supportsResume: true, help: ['--help'], ...spec, invocation: (input) => ({ command, ...run(input) }) };
}

const claude = agent('claude', {
  identity: { args: ['--version'], pattern: /Claude Code/ },
  credentials: {
    env: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX'],
    files: ['.claude/.credentials.json'],
  },
  run: (input) => ({
    // stream-json requires --verbose in print mode; the prompt comes on stdin.
    args: ['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
    // As root, Claude Code refuses bypass mode unless it is told it runs in a sandbox.
    ...(asRoot ? { env: { IS_SANDBOX: '1' } } : {}),
  }),
  parser: claudeStyleParser,
});

/** The items of codex that are tool calls. */
const CODEX_TOOLS = new Set(['command_execution', 'file_change', 'mcp_tool_call', 'collab_tool_call', 'web_search']);
const codexToolName = (item: Json): string => (item.type === 'mcp_tool_call' ? str(item.tool) : undefined) ?? String(item.type);

const codex = agent('codex', {
  help: ['exec', '--help'],
  identity: { args: ['--version'], pattern: /codex-cli/ },
  // Without credentials and a provider of its own, codex retries forever ("Reconnecting...").
  // A config.toml counts: it may define a provider that needs no key.
  credentials: {
    env: ['OPENAI_API_KEY', 'CODEX_API_KEY'],
    files: ['.codex/auth.json', '.codex/config.toml', '$CODEX_HOME/auth.json', '$CODEX_HOME/config.toml'],
    required: true,
  },
  run: (input) => ({
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
  // Top-level `error` events also come while codex retries ("Reconnecting... 1/5"), after which
  // the turn can still complete: only turn.completed / turn.failed decide.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      const item = obj(event.item);
      if (event.type === 'thread.started') state.sessionId ??= str(event.thread_id);
      else if (event.type === 'item.started' && item && CODEX_TOOLS.has(String(item.type))) {
        toolStarted(state, emit, codexToolName(item), str(item.id));
      }
      // Any item but a warning (type "error") means the model answered: a message, a command, an edit.
      else if (event.type === 'item.completed' && item && item.type !== 'error') {
        state.answered = true;
        if (item.type === 'agent_message') {
          state.lastMessage = str(item.text) ?? state.lastMessage;
          if (str(item.text)) emit({ type: 'message', text: item.text as string });
        } else if (CODEX_TOOLS.has(String(item.type))) {
          const failed = item.status === 'failed' || (typeof item.exit_code === 'number' && item.exit_code !== 0);
          toolEnded(state, emit, str(item.id), failed, codexToolName(item));
        }
      } else if (event.type === 'error') {
        state.lastError = str(event.message) ?? state.lastError;
        if (str(event.message)) emit({ type: 'error', message: event.message as string });
      } else if (event.type === 'turn.failed') {
        state.final = { error: str(obj(event.error)?.message) ?? state.lastError ?? 'the turn failed' };
        emit({ type: 'error', message: state.final.error! });
      } else if (event.type === 'turn.completed') {
        state.final = {};
        state.usage = usageOf(obj(event.usage)?.input_tokens, obj(event.usage)?.output_tokens) ?? state.usage;
        if (state.usage) emit({ type: 'usage', usage: state.usage });
      }
    },
    noFinal: 'codex printed no turn.completed event',
  }),
});

const gemini = agent('gemini', {
  credentials: {
    env: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_GENAI_USE_VERTEXAI'],
    files: ['.gemini/oauth_creds.json'],
  },
  run: (input) => ({
    args: [`--prompt=${input.prompt}`, '--output-format', 'stream-json', '--approval-mode', 'yolo', '--skip-trust', ...resumeFlag('--resume', input)],
  }),
  // Auth failures (exit 41) and a bad resume id (exit 42) print only on stderr.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      const assistant = event.type === 'message' && event.role === 'assistant';
      // A message streamed as deltas is emitted whole, once the next other event shows it ended.
      if (state.continues && !assistant && state.lastMessage) emit({ type: 'message', text: state.lastMessage });
      if (event.type === 'init') state.sessionId ??= str(event.session_id);
      else if (assistant) {
        state.answered = true;
        // Streamed as deltas: one message is the run of assistant events since the last other event.
        state.lastMessage = `${state.continues ? (state.lastMessage ?? '') : ''}${str(event.content) ?? ''}`;
        if (event.delta !== true && state.lastMessage) emit({ type: 'message', text: state.lastMessage });
      } else if (event.type === 'tool_use') toolStarted(state, emit, str(event.tool_name), str(event.tool_id));
      else if (event.type === 'tool_result') toolEnded(state, emit, str(event.tool_id), event.status !== 'success');
      else if (event.type === 'error') {
        if (str(event.message)) emit({ type: 'error', message: event.message as string });
      } else if (event.type === 'result') {
        state.final = event.status === 'success' ? {} : { error: str(obj(event.error)?.message) ?? 'error' };
        state.usage = usageOf(obj(event.stats)?.input_tokens, obj(event.stats)?.output_tokens) ?? state.usage;
        if (state.usage) emit({ type: 'usage', usage: state.usage });
        if (state.final.error) emit({ type: 'error', message: state.final.error });
      }
      state.continues = assistant && event.delta === true;
    },
    noFinal: 'gemini printed no result event',
  }),
});

const qwen = agent('qwen', {
  credentials: { env: ['OPENAI_API_KEY', 'DASHSCOPE_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY'], files: ['.qwen/oauth_creds.json'] },
  run: (input) => ({
    // The prompt on stdin: `-p` is deprecated and a positional prompt could be read as an option.
    args: ['--output-format', 'stream-json', '--approval-mode', 'yolo', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});

const opencode = agent('opencode', {
  help: ['run', '--help'],
  credentials: { env: [], files: ['.local/share/opencode/auth.json'] },
  run: (input) => ({
    // `run` reads the message from stdin when it is not a TTY. The permission variable is
    // the one auto-approve switch that has survived every flag rename.
    args: ['run', '--format', 'json', ...resumeFlag('--session', input)],
    stdin: input.prompt,
    env: { OPENCODE_PERMISSION: '{"*":"allow"}' },
  }),
  // There is no final event: a run without an `error` event that exits 0 succeeded.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      const part = obj(event.part);
      state.sessionId ??= str(event.sessionID);
      if (event.type === 'text' || event.type === 'tool_use') state.answered = true;
      if (event.type === 'text') {
        state.lastMessage = str(part?.text) ?? state.lastMessage;
        if (str(part?.text)) emit({ type: 'message', text: part!.text as string });
      }
      if (event.type === 'tool_use') {
        // One event per finished call: its state says how it ended.
        const status = obj(part?.state)?.status;
        if (status === 'completed' || status === 'error') toolEnded(state, emit, str(part?.callID) ?? str(part?.id), status === 'error', str(part?.tool));
      }
      if (event.type === 'step_finish') {
        state.usage = addUsage(state.usage, usageOf(obj(part?.tokens)?.input, obj(part?.tokens)?.output, part?.cost));
        if (state.usage) emit({ type: 'usage', usage: state.usage });
      }
      if (event.type === 'error') {
        const error = obj(event.error);
        const name = str(error?.name);
        const message = str(obj(error?.data)?.message);
        state.final = { error: message ? `${name ? `${name}: ` : ''}${message}` : (name ?? 'error') };
        emit({ type: 'error', message: state.final.error! });
      }
    },
  }),
});

const cursor = agent('cursor', {
  command: 'cursor-agent',
  credentials: { env: ['CURSOR_API_KEY'], files: ['.cursor/cli-config.json'] },
  run: (input) => ({
    args: ['-p', '--output-format', 'stream-json', '--force', '--trust', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});

const amp = agent('amp', {
  // Without credentials amp prints a login prompt and waits forever, even with stdin closed.
  credentials: { env: ['AMP_API_KEY'], files: ['.local/share/amp/secrets.json'], required: true },
  run: (input) => ({
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
});

const copilot = agent('copilot', {
  identity: { args: ['--version'], pattern: /Copilot CLI/ },
  credentials: { env: ['COPILOT_GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_TOKEN', 'COPILOT_PROVIDER_API_KEY'], files: ['.copilot/config.json'] },
  run: (input) => ({
    args: [
      `--prompt=${input.prompt}`,
      '--allow-all',
      '--no-ask-user',
      '--output-format',
      'json',
      ...(input.agentSessionId === undefined ? [] : [`--resume=${input.agentSessionId}`]),
    ],
  }),
  // No start event carries the session id: it comes in the final `result`. The reason of a
  // failure comes in `session.error`.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      const data = obj(event.data);
      if (event.type === 'assistant.message') {
        state.answered = true;
        state.lastMessage = str(data?.content) ?? state.lastMessage;
        if (str(data?.content)) emit({ type: 'message', text: data!.content as string });
      } else if (event.type === 'tool.execution_start') toolStarted(state, emit, str(data?.toolName), str(data?.toolCallId));
      else if (event.type === 'tool.execution_complete') toolEnded(state, emit, str(data?.toolCallId), data?.success === false);
      else if (event.type === 'session.error') {
        state.lastError = str(data?.message) ?? state.lastError;
        if (str(data?.message)) emit({ type: 'error', message: data!.message as string });
      } else if (event.type === 'result') {
        state.sessionId ??= str(event.sessionId);
        state.final = event.exitCode === 0 ? {} : { error: state.lastError ?? `copilot reported exit code ${String(event.exitCode)}` };
      }
    },
    noFinal: 'copilot printed no result event',
  }),
});

/** The text of a goose assistant message (`content: [{type: "text", text}]`). */
function gooseText(message: Json | undefined): string | undefined {
  if (message?.role !== 'assistant' || !Array.isArray(message.content)) return undefined;
  const text = message.content.map((c) => (obj(c)?.type === 'text' ? (str(obj(c)?.text) ?? '') : '')).join('');
  return text || undefined;
}

/** Goose prints no session id, so the adapter names the session itself and resumes by name. */
const goose = agent('goose', {
  help: ['run', '--help'],
  // The npm package `goose-cli` installs an unrelated database-migration tool also named goose.
  identity: { args: ['--help'], pattern: /^(?=[\s\S]*\bsession\b)(?=[\s\S]*\brun\b)/i },
  run: (input) => ({
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
    const inner = jsonLinesParser({
      onEvent(event, state, emit) {
        if (event.type === 'message') {
          state.answered = true;
          const text = gooseText(obj(event.message));
          if (text) {
            state.lastMessage = text;
            emit({ type: 'message', text });
          }
        } else if (event.type === 'error') {
          state.final = { error: str(event.error) ?? 'error' };
          emit({ type: 'error', message: state.final.error! });
        } else if (event.type === 'complete') {
          if (!state.final?.error) state.final = {};
          state.usage = usageOf(event.input_tokens, event.output_tokens, event.cost_usd) ?? state.usage;
          if (state.usage) emit({ type: 'usage', usage: state.usage });
        }
      },
      noFinal: 'goose printed no complete event',
    })();
    const name = input.agentSessionId ?? `headless-${input.resumeId}`;
    return { line: inner.line, sessionId: () => name, finish: (exitCode) => ({ ...inner.finish(exitCode), agentSessionId: name }) };
  },
});

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
