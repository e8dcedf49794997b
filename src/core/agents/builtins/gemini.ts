import { jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from '../parsing/json-lines';
import { agent, byPermissions, resumeFlag } from './define';

export const gemini = agent('gemini', {
  credentials: {
    env: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_APPLICATION_CREDENTIALS', 'GOOGLE_GENAI_USE_VERTEXAI'],
    files: ['.gemini/oauth_creds.json'],
  },
  // The prompt on stdin, out of the process list: `--prompt` is appended to it, so an empty one
  // only asks for headless mode.
  // Read-only: the default approval mode, in which headless gemini leaves out every tool that would ask.
  readOnly: true,
  // Its chats only (~/.gemini/tmp/<project>/chats): a `.env` or anything else a run leaves in ~/.gemini is gone at the next.
  stateDirs: ['.gemini/tmp'],
  config: ['.gemini/settings.json', '.gemini/GEMINI.md', '.gemini/extensions', '.gemini/commands', '.gemini/google_accounts.json'],
  run: (input) => ({
    args: [
      '--prompt=',
      '--output-format',
      'stream-json',
      '--approval-mode',
      byPermissions(input, 'yolo', 'default'),
      '--skip-trust',
      ...resumeFlag('--resume', input),
    ],
    stdin: input.prompt,
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
