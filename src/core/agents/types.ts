/** What an agent adapter is: how to start its CLI headless, and how to read what it printed. */

export interface AgentRunInput {
  prompt: string;
  workspacePath: string;
  /** The product Session id. */
  resumeId: string;
  /** Set when resuming: the agent's own session id captured from an earlier run. */
  agentSessionId?: string;
}

export interface AgentInvocation {
  command: string;
  args: string[];
  /** Fed to stdin, which is then closed. Absent: stdin is closed. */
  stdin?: string;
  /** Added to the run's environment. */
  env?: Record<string, string>;
}

export interface AgentVerdict {
  /** The agent's own session id, as read from its output (or named by the adapter). */
  agentSessionId?: string;
  /** Set when the output says the run failed, even if the process exited 0. */
  error?: string;
}

/** Reads one run's stdout, line by line, then judges it together with the exit code. */
export interface AgentOutputParser {
  line(line: string): void;
  /** The agent's session id as soon as it is known, so a run cut short by a crash stays resumable. */
  sessionId(): string | undefined;
  finish(exitCode: number | null): AgentVerdict;
}

export interface AgentAdapter {
  name: string;
  /** Only `agent` can run headless; `utility` agents and the `shell` adapter have no model loop. */
  kind: 'agent' | 'utility' | 'shell';
  /** The executable the adapter runs, checked on the PATH at request time. */
  command: string;
  supportsResume: boolean;
  invocation(input: AgentRunInput): AgentInvocation;
  parser(input: AgentRunInput): AgentOutputParser;
}
