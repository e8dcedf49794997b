import { addUsage, jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from '../parsing/json-lines';
import { agent, resumeFlag } from './define';

/** pi's tools that only read (its `--tools` allowlist for a read-only run). */
const READING_TOOLS = 'read,grep,find,ls';

/** The text of an assistant message's content parts. */
const textOf = (content: unknown): string | undefined =>
  str(
    (Array.isArray(content) ? content : [])
      .map((part) => obj(part))
      .filter((part) => part?.type === 'text')
      .map((part) => str(part?.text) ?? '')
      .join(''),
  );

/** pi 1.x tells a provider's refusal as `401: {"message": …}`: its status, then the provider's own words. */
function providerReason(text: string | undefined): string | undefined {
  const said = text === undefined ? undefined : /^(\d{3}): (\{.*\})$/s.exec(text);
  if (!said) return text;
  try {
    const body = obj(JSON.parse(said[2] ?? ''));
    const words = str(body?.message) ?? str(obj(body?.error)?.message);
    return words === undefined ? text : `${said[1]} ${words}`;
  } catch {
    return text;
  }
}

export const pi = agent('pi', {
  identity: { args: ['--help'], pattern: /^pi - AI coding assistant/ },
  // Its providers' own variables, or its own files (`pi` login, or providers in models.json).
  credentials: {
    env: ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GEMINI_API_KEY', 'OPENROUTER_API_KEY', 'GROQ_API_KEY', 'XAI_API_KEY', 'MISTRAL_API_KEY'],
    files: ['.pi/agent/auth.json', '.pi/agent/models.json'],
  },
  readOnly: true,
  stateDirs: ['.pi/agent/sessions'],
  config: [
    '.pi/agent/settings.json',
    '.pi/agent/models.json',
    '.pi/agent/auth.json',
    '.pi/agent/AGENTS.md',
    '.pi/agent/extensions',
    '.pi/agent/skills',
    '.pi/agent/prompts',
  ],
  run: (input) => ({
    // The prompt on stdin; read-only: only its reading tools are enabled.
    args: ['-p', '--mode', 'json', ...(input.permissions === 'read-only' ? ['--tools', READING_TOOLS] : []), ...resumeFlag('--session', input)],
    stdin: input.prompt,
  }),
  // The first line names its session; each assistant message ends with its text, usage and stop reason.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      if (event.type === 'session') state.sessionId ??= str(event.id);
      if (event.type === 'tool_execution_start') toolStarted(state, emit, str(event.toolName), str(event.toolCallId));
      if (event.type === 'tool_execution_end') toolEnded(state, emit, str(event.toolCallId), event.isError === true, str(event.toolName));
      const message = obj(event.message);
      if (event.type !== 'message_end' || message?.role !== 'assistant') return;
      const usage = obj(message.usage);
      state.usage = addUsage(state.usage, usageOf(usage?.input, usage?.output, obj(usage?.cost)?.total));
      if (message.stopReason === 'error') {
        const reason = providerReason(str(message.errorMessage)) ?? 'the model call failed';
        state.final = { error: reason };
        return emit({ type: 'error', message: reason });
      }
      state.answered = true;
      if (state.usage) emit({ type: 'usage', usage: state.usage });
      const text = textOf(message.content);
      if (text) {
        state.lastMessage = text;
        emit({ type: 'message', text });
      }
    },
  }),
});
