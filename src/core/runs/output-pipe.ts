import type { AgentConversation } from '../agents/types';

export interface OutputPipeOptions {
  taskId: string;
  adapterName: string;
  conversation: AgentConversation;
  log: (message: string, error?: unknown) => void;
  /** The agent printed its own session id: called once, with it. */
  onSessionId(id: string): void;
  /** Takes the run's secrets out of each line before anything reads it. */
  redact?: (line: string) => string;
}

/** A run's stdout, line by line: into the agent's conversation (whose events go to the timeline), watching for the agent's session id. */
export function outputPipe(o: OutputPipeOptions): (line: string) => void {
  let sessionIdNoted = false;
  let failed = false;
  return (line) => {
    if (failed) return;
    try {
      o.conversation.line(o.redact ? o.redact(line) : line);
    } catch (error) {
      // A custom adapter's parser or protocol must not take the service down; its verdict says the rest.
      o.log(`the ${o.adapterName} adapter could not read a line of ${o.taskId}`, error);
      failed = true;
      return;
    }
    const id = o.conversation.sessionId();
    if (!sessionIdNoted && id !== undefined) {
      sessionIdNoted = true;
      o.onSessionId(o.redact ? o.redact(id) : id);
    }
  };
}
