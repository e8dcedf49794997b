import { type Emit, type Json, type ParseState, jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from '../parsing/json-lines';
import { agent, byPermissions } from './define';

/**
 * What goose 1.52 prints, as recorded (test/fixtures/transcripts/goose.json): a reply is a
 * `message` whose content holds text, `toolRequest` or `toolResponse` items. A failed model
 * call is a message too: an `error` item (401), or, for a 500, plain text that begins "Ran into
 * this error:" from goose itself (no `metadata.inference`), followed by exit 0.
 */
const GOOSE_ERROR = /^Ran into this error: /;

function onContent(item: Json, fromModel: boolean, state: ParseState, emit: Emit): void {
  if (item.type === 'text') {
    const text = str(item.text);
    if (!text) return;
    if (!fromModel && GOOSE_ERROR.test(text)) {
      state.final = { error: text.trim() };
      emit({ type: 'error', message: text.trim() });
      return;
    }
    state.answered = true;
    state.lastMessage = text;
    emit({ type: 'message', text });
  } else if (item.type === 'error') {
    state.lastError = str(item.message) ?? 'error';
    emit({ type: 'error', message: state.lastError });
  } else if (item.type === 'toolRequest') {
    state.answered = true;
    toolStarted(state, emit, str(obj(obj(obj(item.toolCall)?.value))?.name), str(item.id));
  } else if (item.type === 'toolResponse') {
    const result = obj(item.toolResult);
    toolEnded(state, emit, str(item.id), result?.status !== 'success' || obj(result.value)?.isError === true);
  }
}

function onMessage(message: Json, state: ParseState, emit: Emit): void {
  if (!Array.isArray(message.content)) return;
  // Only what the model produced carries inference metadata; goose's own notes do not.
  const fromModel = obj(obj(message.metadata)?.inference) !== undefined;
  for (const item of message.content) {
    const content = obj(item);
    if (content) onContent(content, fromModel || message.role !== 'assistant', state, emit);
  }
}

/** Goose prints no session id, so the adapter names the session itself and resumes by name. */
export const goose = agent('goose', {
  help: ['run', '--help'],
  // The npm package `goose-cli` installs an unrelated database-migration tool also named goose.
  identity: { args: ['--help'], pattern: /^(?=[\s\S]*\bsession\b)(?=[\s\S]*\brun\b)/i },
  readOnly: true,
  // Its sessions only (sessions.db): the rest of its folders start empty at every run.
  stateDirs: ['.local/share/goose/sessions'],
  config: ['.config/goose/config.yaml', '.config/goose/secrets.yaml', '.config/goose/.goosehints', '.config/goose/recipes'],
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
    // Read-only: chat mode, in which goose uses no tools at all.
    env: { GOOSE_MODE: byPermissions(input, 'auto', 'chat') },
  }),
  parser: (input) => {
    const inner = jsonLinesParser({
      onEvent(event, state, emit) {
        const message = obj(event.message);
        if (event.type === 'message' && message) onMessage(message, state, emit);
        else if (event.type === 'error') {
          const error = str(event.error) ?? 'error';
          state.final = { error };
          emit({ type: 'error', message: error });
        } else if (event.type === 'complete') {
          if (!state.final?.error) state.final = {};
          state.usage = usageOf(event.input_tokens, event.output_tokens, event.cost_usd) ?? state.usage;
          if (state.usage) emit({ type: 'usage', usage: state.usage });
        }
      },
      noFinal: 'goose printed no complete event',
      // Before a session starts (no provider configured), goose says why on stdout, as text.
      onText: (line, state) => {
        const said = /^\s*error:\s*(.+)$/i.exec(line)?.[1];
        if (said) state.lastError = said.trim();
      },
    })();
    const name = input.agentSessionId ?? `headless-${input.resumeId}`;
    return { line: inner.line, sessionId: () => name, finish: (exitCode) => ({ ...inner.finish(exitCode), agentSessionId: name }) };
  },
});
