import { type Emit, type Json, type ParseState, jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from '../parsing/json-lines';
import { agent, byPermissions } from './define';

/**
 * Its prompt can only be an argument: in `--json` mode it refuses one on stdin. After `--` it is
 * never an option, and a prompt of one word is refused ("unquoted prompt"), or run as its
 * subcommand of that name (`auth`, `doctor`): with a whitespace at its end it is neither.
 */
const asArgument = (prompt: string): string => (/\s$/.test(prompt) ? prompt : `${prompt}\n`);

export const cline = agent('cline', {
  identity: { args: ['--help'], pattern: /Cline CLI - AI coding assistant/ },
  // Its providers' own variables, or the providers `cline auth` saved.
  credentials: {
    env: ['CLINE_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY', 'OPENROUTER_API_KEY'],
    files: ['.cline/data/settings/providers.json'],
  },
  // `--id` starts its terminal interface, which needs a TTY: headless, only `cline-acp` resumes.
  supportsResume: false,
  // Read-only: with auto-approval off and no TTY, it refuses every tool that would ask.
  readOnly: true,
  stateDirs: ['.cline/data/sessions', '.cline/data/db', '.cline/data/logs', '.cline/data/locks', '.cline/data/cache', '.cline/tasks', '.cline/cron'],
  config: ['.cline/data/settings', '.cline/hooks', '.cline/plugins', '.cline/skills'],
  run: (input) => ({
    args: ['--json', '--auto-approve', byPermissions(input, 'true', 'false'), '--', asArgument(input.prompt)],
    // Without it, its first run starts a "hub" daemon in a session of its own, which outlives the run.
    env: { CLINE_SESSION_BACKEND_MODE: 'local' },
  }),
  // Its `run_result` is the verdict; on the way, its text and tool calls start and end as `content_*` events.
  parser: jsonLinesParser({
    noFinal: 'cline ended without its run result',
    onEvent(event, state, emit) {
      if (event.type === 'error') state.lastError = str(event.message) ?? state.lastError;
      if (event.type === 'run_result') return runResult(event, state, emit);
      const inner = obj(event.event);
      if (event.type !== 'agent_event' || !inner) return;
      if (inner.type === 'usage') {
        state.usage = usageOf(inner.totalInputTokens, inner.totalOutputTokens, inner.totalCost) ?? state.usage;
        if (state.usage) emit({ type: 'usage', usage: state.usage });
      }
      if (inner.type === 'error') {
        const message = str(obj(inner.error)?.message);
        state.lastError = message ?? state.lastError;
        if (message && inner.recoverable === false) emit({ type: 'error', message });
      }
      if (inner.contentType === 'tool') toolEvent(inner, state, emit);
      if (inner.contentType === 'text' && inner.type === 'content_end') {
        const text = str(inner.text);
        state.answered = true;
        state.lastMessage = text ?? state.lastMessage;
        if (text) emit({ type: 'message', text });
      }
    },
  }),
});

function toolEvent(inner: Json, state: ParseState, emit: Emit): void {
  state.answered = true;
  const id = str(inner.toolCallId);
  if (inner.type === 'content_start') toolStarted(state, emit, str(inner.toolName), id);
  if (inner.type === 'content_end') toolEnded(state, emit, id, inner.error !== undefined || obj(inner.output)?.error !== undefined, str(inner.toolName));
}

/** The end of its run: `completed`, or its reason (a refused model call says why in its text). */
function runResult(event: Json, state: ParseState, emit: Emit): void {
  // Its sub-agents' tokens included.
  const usage = obj(event.aggregateUsage) ?? obj(event.usage);
  const total = usageOf(usage?.inputTokens, usage?.outputTokens, usage?.totalCost);
  if (total && (total.inputTokens !== state.usage?.inputTokens || total.outputTokens !== state.usage?.outputTokens)) emit({ type: 'usage', usage: total });
  state.usage = total ?? state.usage;
  if (event.finishReason === 'completed') {
    state.final = {};
    state.lastMessage = str(event.text) ?? state.lastMessage;
    return;
  }
  state.final = { error: str(event.text) ?? state.lastError ?? `cline stopped: ${str(event.finishReason) ?? 'no reason given'}` };
}
