/**
 * @module The `lines` protocol: the prompt is given on start (argv, or stdin then closed), and
 * stdout is read line by line through the adapter's parser. What every built-in CLI speaks today.
 */
import type { AgentAdapter, AgentConversation, AgentIO, AgentProtocol, AgentRunInput } from '../types';

export function linesProtocol(parser: AgentAdapter['parser']): AgentProtocol {
  return {
    name: 'lines',
    talksBack: false,
    asks: false,
    open(io: AgentIO, input: AgentRunInput): AgentConversation {
      const read = parser(input);
      return {
        line(line) {
          for (const event of read.line(line) ?? []) io.emit(event);
        },
        sessionId: () => read.sessionId(),
        finish: (exitCode) => read.finish(exitCode),
      };
    },
  };
}

/** The protocol an adapter speaks in a run: its `asking` one when the run must ask (docs/approvals.md). */
export const protocolOf = (adapter: AgentAdapter, permissions?: AgentRunInput['permissions']): AgentProtocol =>
  (permissions === 'ask' ? adapter.asking : undefined) ?? adapter.protocol ?? linesProtocol((input) => adapter.parser(input));
