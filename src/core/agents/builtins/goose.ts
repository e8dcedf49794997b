import { type Json, jsonLinesParser, obj, str, usageOf } from '../parsing/json-lines';
import { agent } from './define';

/** The text of a goose assistant message (`content: [{type: "text", text}]`). */
function gooseText(message: Json | undefined): string | undefined {
  if (message?.role !== 'assistant' || !Array.isArray(message.content)) return undefined;
  const text = message.content.map((c) => (obj(c)?.type === 'text' ? (str(obj(c)?.text) ?? '') : '')).join('');
  return text || undefined;
}

/** Goose prints no session id, so the adapter names the session itself and resumes by name. */
export const goose = agent('goose', {
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
