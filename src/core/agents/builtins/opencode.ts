import { addUsage, jsonLinesParser, obj, str, toolEnded, usageOf } from '../parsing/json-lines';
import { agent, byPermissions, resumeFlag } from './define';

export const opencode = agent('opencode', {
  help: ['run', '--help'],
  credentials: { env: [], files: ['.local/share/opencode/auth.json'] },
  readOnly: true,
  // Its data folder only (opencode.db, with its WAL beside it): its config, cache (downloaded binaries) and state folders start empty at every run.
  stateDirs: ['.local/share/opencode'],
  config: [
    '.config/opencode/opencode.json',
    '.config/opencode/opencode.jsonc',
    '.config/opencode/config.json',
    '.config/opencode/AGENTS.md',
    '.config/opencode/plugin',
    '.config/opencode/plugins',
    '.config/opencode/agent',
    '.config/opencode/command',
  ],
  run: (input) => ({
    // `run` reads the message from stdin when it is not a TTY. The permission variable is
    // the one auto-approve switch that has survived every flag rename.
    args: ['run', '--format', 'json', ...resumeFlag('--session', input)],
    stdin: input.prompt,
    env: { OPENCODE_PERMISSION: byPermissions(input, '{"*":"allow"}', '{"*":"allow","edit":"deny","bash":"deny"}') },
  }),
  // There is no final event: a run without an `error` event that exits 0 succeeded.
  parser: jsonLinesParser({
    onEvent(event, state, emit) {
      const part = obj(event.part);
      state.sessionId ??= str(event.sessionID);
      if (event.type === 'text' || event.type === 'tool_use') state.answered = true;
      if (event.type === 'text') {
        const text = str(part?.text);
        state.lastMessage = text ?? state.lastMessage;
        if (text) emit({ type: 'message', text });
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
        const reason = message ? `${name ? `${name}: ` : ''}${message}` : (name ?? 'error');
        state.final = { error: reason };
        emit({ type: 'error', message: reason });
      }
    },
  }),
});
