import { type Json, jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from '../parsing/json-lines';
import { agent, byPermissions } from './define';

/** The items of codex that are tool calls. */
const CODEX_TOOLS = new Set(['command_execution', 'file_change', 'mcp_tool_call', 'collab_tool_call', 'web_search']);
const codexToolName = (item: Json): string => (item.type === 'mcp_tool_call' ? str(item.tool) : undefined) ?? String(item.type);

export const codex = agent('codex', {
  help: ['exec', '--help'],
  identity: { args: ['--version'], pattern: /codex-cli/ },
  // Without credentials and a provider of its own, codex retries forever ("Reconnecting...").
  // A config.toml counts: it may define a provider that needs no key.
  credentials: {
    env: ['OPENAI_API_KEY', 'CODEX_API_KEY'],
    files: ['.codex/auth.json', '.codex/config.toml', '$CODEX_HOME/auth.json', '$CODEX_HOME/config.toml'],
    required: true,
  },
  readOnly: true,
  structuredOutput: 'native',
  // Its rollouts only: what else a run writes in CODEX_HOME is gone at the next.
  stateDirs: ['.codex/sessions'],
  config: ['.codex/config.toml', '.codex/AGENTS.md', '.codex/prompts', '.codex/rules'],
  run: (input) => ({
    // Every flag before `resume` (older parsers require it); `-` reads the prompt from stdin.
    args: [
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--sandbox',
      // Inside the service's sandbox codex's own cannot start (no nested user namespaces), so every
      // command would fail: the service's confines the run (its workspace read-only under read-only).
      byPermissions(input, input.sandboxed ? 'danger-full-access' : 'workspace-write', 'read-only'),
      '--color',
      'never',
      // Its final message is then JSON matching the schema (OpenAI's strict structured output).
      ...(input.outputSchema === undefined ? [] : ['--output-schema', input.outputSchema.file]),
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
        const error = str(obj(event.error)?.message) ?? state.lastError ?? 'the turn failed';
        state.final = { error };
        emit({ type: 'error', message: error });
      } else if (event.type === 'turn.completed') {
        state.final = {};
        state.usage = usageOf(obj(event.usage)?.input_tokens, obj(event.usage)?.output_tokens) ?? state.usage;
        if (state.usage) emit({ type: 'usage', usage: state.usage });
      }
    },
    noFinal: 'codex printed no turn.completed event',
  }),
});
