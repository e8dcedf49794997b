import { nearest } from '../util/text';
import type { AgentAdapter, AgentRunInput } from './types';

/** A custom agent defined in the config file (docs/agents.md: Custom command agents). */
export interface CommandAgentDefinition {
  command: string;
  /** Placeholders: {prompt} {resumeId} {agentSessionId} {workspacePath}. */
  args: string[];
  /** Argv to resume a Session. Absent: the agent cannot resume. */
  resumeArgs?: string[];
  /**
   * Fed to the agent's stdin, placeholders filled: `"{prompt}"` keeps the prompt out of the
   * process list, where any local user can read argv. Absent: stdin is closed.
   */
  stdin?: string;
  /** A regex run on stdout lines; group 1 is the agent's session id. Absent: it is the resumeId. */
  sessionIdPattern?: string;
  /** @default "agent" */
  kind?: 'agent' | 'utility';
  /** Where it keeps sessions and history, relative to HOME: inside a sandbox, the workspace's own (docs/security.md: Agent state). */
  state?: string[];
  /** Its executable configuration and login files, relative to HOME: inside a sandbox, the operator's, read-only. */
  config?: string[];
}

const PLACEHOLDERS = ['prompt', 'resumeId', 'agentSessionId', 'workspacePath'];
const PLACEHOLDER = /\{(prompt|resumeId|agentSessionId|workspacePath)\}/g;

/**
 * What is wrong with a definition that still loads: a `{word}` that is no placeholder (a typo
 * such as `{promt}` passes the braces through, so the prompt never reaches the agent), or no
 * `{prompt}` at all. `doctor` reports these.
 */
function definitionProblems(name: string, definition: CommandAgentDefinition): string[] {
  const problems: string[] = [];
  for (const key of ['args', 'resumeArgs', 'stdin'] as const) {
    for (const [, word] of [definition[key] ?? []]
      .flat()
      .join(' ')
      .matchAll(/\{(\w+)\}/g)) {
      if (word === undefined || PLACEHOLDERS.includes(word)) continue;
      const meant = nearest(word, PLACEHOLDERS);
      problems.push(`agents.${name}.${key} has {${word}}, which is no placeholder${meant ? ` (did you mean {${meant}}?)` : ''}`);
    }
    const args = key === 'stdin' ? undefined : definition[key];
    if (args && !definition.stdin?.includes('{prompt}') && !args.some((arg) => arg.includes('{prompt}'))) {
      problems.push(`agents.${name}.${key} never passes the prompt: put {prompt} in "stdin" (out of the process list) or an argument`);
    }
  }
  return problems;
}

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
  return args.map((arg) => arg.replace(PLACEHOLDER, (_, name: string) => values[name] ?? ''));
}

export function createCommandAgent(name: string, definition: CommandAgentDefinition): AgentAdapter {
  const pattern = definition.sessionIdPattern === undefined ? undefined : new RegExp(definition.sessionIdPattern);
  return {
    name,
    kind: definition.kind ?? 'agent',
    command: definition.command,
    supportsResume: definition.resumeArgs !== undefined,
    setupProblems: definitionProblems(name, definition),
    stateDirs: definition.state,
    config: definition.config,
    invocation(input) {
      const args = input.agentSessionId !== undefined && definition.resumeArgs ? definition.resumeArgs : definition.args;
      const stdin = definition.stdin === undefined ? {} : { stdin: fillArgs([definition.stdin], input).join('') };
      return { command: definition.command, args: fillArgs(args, input), ...stdin };
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
