import { jsonLinesParser, obj, str, toolEnded, toolStarted } from '../parsing/json-lines';
import { agent, byPermissions } from './define';

export const copilot = agent('copilot', {
  identity: { args: ['--version'], pattern: /Copilot CLI/ },
  credentials: { env: ['COPILOT_GITHUB_TOKEN', 'GH_TOKEN', 'GITHUB_TOKEN', 'COPILOT_PROVIDER_API_KEY'], files: ['.copilot/config.json'] },
  // The prompt piped on stdin (headless when stdin is not a terminal), out of the process list.
  // Read-only: nothing allowed beyond its defaults, writes and the shell denied; it cannot ask.
  readOnly: true,
  // ~/.copilot (its session store sits at the top of it, beside its WAL); not its cache, where it unpacks code a run could alter.
  stateDirs: ['.copilot'],
  config: ['.copilot/mcp-config.json', '.copilot/agents', '.copilot/copilot-instructions.md'],
  run: (input) => ({
    stdin: input.prompt,
    args: [
      ...byPermissions(input, ['--allow-all'], ['--deny-tool=write', '--deny-tool=shell']),
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
        const text = str(data?.content);
        state.lastMessage = text ?? state.lastMessage;
        if (text) emit({ type: 'message', text });
      } else if (event.type === 'tool.execution_start') toolStarted(state, emit, str(data?.toolName), str(data?.toolCallId));
      else if (event.type === 'tool.execution_complete') toolEnded(state, emit, str(data?.toolCallId), data?.success === false);
      else if (event.type === 'session.error') {
        const message = str(data?.message);
        state.lastError = message ?? state.lastError;
        if (message) emit({ type: 'error', message });
      } else if (event.type === 'result') {
        state.sessionId ??= str(event.sessionId);
        state.final = event.exitCode === 0 ? {} : { error: state.lastError ?? `copilot reported exit code ${String(event.exitCode)}` };
      }
    },
    noFinal: 'copilot printed no result event',
  }),
});
