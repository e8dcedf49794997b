import type { AgentAdapter, AgentInvocation, AgentRunInput } from '../types';

/**
 * How a built-in adapter is declared: one per real CLI (a file each beside this one), each with
 * the flags that keep it from ever waiting for a human and its machine-readable output; the
 * agents doc says what each does and which versions the test suite runs. The prompt never lands
 * where it could be read as an option: it goes on stdin, or glued to its option
 * (`--prompt=<text>`), which parsers take whole.
 */

export const resumeFlag = (flag: string, input: AgentRunInput): string[] => (input.agentSessionId === undefined ? [] : [flag, input.agentSessionId]);

export const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** One flag set or the other, by the run's permissions. */
export const byPermissions = <T>(input: AgentRunInput, full: T, readOnly: T): T => (input.permissions === 'read-only' ? readOnly : full);

export type AdapterSpec = Omit<AgentAdapter, 'name' | 'kind' | 'supportsResume' | 'invocation' | 'command'> & {
  /** @default true */
  supportsResume?: boolean;
  /** @default the agent's name */
  command?: string;
  /** The invocation without its command, which is always the adapter's. */
  run(input: AgentRunInput): Omit<AgentInvocation, 'command'>;
};

/** A headless-capable agent, which can resume unless said otherwise; its usage is `--help` unless said otherwise. */
export function agent(name: string, { run, command = name, ...spec }: AdapterSpec): AgentAdapter {
  return { name, command, kind: 'agent', supportsResume: true, help: ['--help'], ...spec, invocation: (input) => ({ command, ...run(input) }) };
}
