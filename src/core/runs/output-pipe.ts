import type { AgentOutputParser } from '../agents/types';
import { type RunEvents, fromAgentEvent } from '../events/run-events';

export interface OutputPipeOptions {
  taskId: string;
  adapterName: string;
  parser: AgentOutputParser;
  events: RunEvents;
  log: (message: string, error?: unknown) => void;
  /** The agent printed its own session id: called once, with it. */
  onSessionId(id: string): void;
}

/** A run's stdout, line by line: through the agent's parser into the timeline, watching for the agent's session id. */
export function outputPipe(o: OutputPipeOptions): (line: string) => void {
  let sessionIdNoted = false;
  let parserFailed = false;
  return (line) => {
    try {
      for (const event of o.parser.line(line) ?? []) {
        const { type, data } = fromAgentEvent(event);
        o.events.append(o.taskId, type, data);
      }
    } catch (error) {
      // A custom adapter's parser must not take the service down; its verdict says the rest.
      if (!parserFailed) o.log(`the ${o.adapterName} adapter could not read a line of ${o.taskId}`, error);
      parserFailed = true;
      return;
    }
    const id = o.parser.sessionId();
    if (!sessionIdNoted && id !== undefined) {
      sessionIdNoted = true;
      o.onSessionId(id);
    }
  };
}
