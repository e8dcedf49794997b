/**
 * @module The built-ins that also speak the Agent Client Protocol, each as `<name>-acp`
 * (docs/agents.md: ACP): the same CLI, credentials, state and configuration, started in its ACP
 * mode and read through the `acp` protocol instead of its stdout parser. Both are kept: a start
 * picks one by its agent name, and the real-CLI tier runs each through both.
 */
import { acpProtocol } from '../protocols/acp';
import type { AgentAdapter } from '../types';
import { gemini } from './gemini';
import { opencode } from './opencode';
import { qwen } from './qwen';

/** `base`, started with `args` and spoken to over ACP; `resumes`: its `session/load` works (checked against the real CLI). */
function acpTwin(base: AgentAdapter, args: string[], o: { resumes: boolean }): AgentAdapter {
  const { structuredOutput: _native, ...rest } = base;
  return {
    ...rest,
    name: `${base.name}-acp`,
    supportsResume: o.resumes,
    // Its permissions are the run's policy, answered to its requests, not flags.
    readOnly: true,
    invocation: (input) => {
      const { env } = base.invocation(input);
      return { command: base.command, args, ...(env ? { env } : {}) };
    },
    protocol: acpProtocol,
  };
}

export const ACP_TWINS: readonly AgentAdapter[] = [
  // Gemini CLI 0.61.0 answers `session/load` of a session it just saved with "Invalid session identifier".
  acpTwin(gemini, ['--acp'], { resumes: false }),
  acpTwin(qwen, ['--acp'], { resumes: true }),
  acpTwin(opencode, ['acp'], { resumes: true }),
];
