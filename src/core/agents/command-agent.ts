import type { AgentAdapter, AgentRunInput } from './types';

/** A custom agent defined in the config file (docs/agents.md: Custom command agents). */
export interface CommandAgentDefinition {
  command: string;
  /** Placeholders: {prompt} {resumeId} {agentSessionId} {workspacePath}. */
  args: string[];
  /** Argv to resume a Session. Absent: the agent cannot resume. */
  resumeArgs?: string[];
  /** A regex run on stdout lines; group 1 is the agent's session id. Absent: it is the resumeId. */
  sessionIdPattern?: string;
  /** @default "agent" */
  kind?: 'agent' | 'utility';
}

const PLACEHOLDER = /\{(prompt|resumeId|agentSessionId|workspacePath)\}/g;

/**
 * Fills placeholders inside each argv element. One element stays one element whatever the
 * values hold: nothing is split and nothing passes through a shell.
 */
export function fillArgs(args: string[], input: AgentRunInput): string[] {
  const values: Record<string, string> = {
    prompt: input.prompt,
    resumeId: input.resumeId,
    agentSessionId: input.agentSessionId ?? '',
    workspacePath: input.workspacePath,
  };
  return args.map((arg) => arg.replace(PLACEHOLDER, (_, name: string) => values[name]!));
}

export function createCommandAgent(name: string, definition: CommandAgentDefinition): AgentAdapter {
  const pattern = definition.sessionIdPattern === undefined ? undefined : new RegExp(definition.sessionIdPattern);
  return {
    name,
    kind: definition.kind ?? 'agent',
    command: definition.command,
    supportsResume: definition.resumeArgs !== undefined,
    invocation(input) {
      const args = input.agentSessionId !== undefined && definition.resumeArgs ? definition.resumeArgs : definition.args;
      return { command: definition.command, args: fillArgs(args, input) };
    },
    parser(input) {
      let agentSessionId = pattern ? undefined : input.resumeId;
      return {
        line(line) {
          if (!pattern || agentSessionId !== undefined) return;
          const match = pattern.exec(line);
          if (match?.[1]) agentSessionId = match[1];
        },
        sessionId: () => agentSessionId ?? input.agentSessionId,
        finish() {
          return { agentSessionId: agentSessionId ?? input.agentSessionId };
        },
      };
    },
  };
}
