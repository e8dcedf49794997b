/**
 * @module The built-ins that also speak the Agent Client Protocol, each as `<name>-acp`
 * (docs/agents.md: ACP): the same CLI, credentials, state and configuration, started in its ACP
 * mode and read through the `acp` protocol instead of its stdout parser. Both are kept: a start
 * picks one by its agent name, and the real-CLI tier runs each through both.
 */
import { acpProtocol } from '../protocols/acp';
import type { AgentAdapter } from '../types';
import { cline } from './cline';
import { copilot } from './copilot';
import { gemini } from './gemini';
import { goose } from './goose';
import { opencode } from './opencode';
import { qwen } from './qwen';

interface TwinOptions {
  /** Its `session/load` works (checked against the real CLI). */
  resumes: boolean;
  /**
   * It asks before its tools in its ACP mode (with `askEnv` under `permissions: "ask"`): its
   * read-only and `ask` runs are then the run's policy answering its questions. One that does
   * not ask runs read-only only as its base does, by its own settings, or in a sandbox.
   */
  asks: boolean;
  /** Under `ask`, over its base's environment: the mode in which it asks. */
  askEnv?: Record<string, string>;
  /** Under `ask` and `read-only`, after `args`: the flags that make it ask (its base's read-only flags are not passed). */
  askArgs?: string[];
}

/** `base`, started with `args` and spoken to over ACP. */
function acpTwin(base: AgentAdapter, args: string[], o: TwinOptions): AgentAdapter {
  const { structuredOutput: _native, ...rest } = base;
  return {
    ...rest,
    name: `${base.name}-acp`,
    supportsResume: o.resumes,
    readOnly: o.asks,
    invocation: (input) => {
      const asked = input.permissions === 'ask';
      const { env } = base.invocation(asked ? { ...input, permissions: 'full' } : input);
      const all = { ...env, ...(asked ? o.askEnv : {}) };
      const asking = input.permissions !== 'full' ? (o.askArgs ?? []) : [];
      return { command: base.command, args: [...args, ...asking], ...(Object.keys(all).length > 0 ? { env: all } : {}) };
    },
    protocol: acpProtocol({ asks: o.asks }),
  };
}

export const ACP_TWINS: readonly AgentAdapter[] = [
  // Gemini CLI 0.61.0 answers `session/load` of a session it just saved with "Invalid session identifier".
  acpTwin(gemini, ['--acp'], { resumes: false, asks: true }),
  acpTwin(qwen, ['--acp'], { resumes: true, asks: true }),
  acpTwin(opencode, ['acp'], { resumes: true, asks: true, askEnv: { OPENCODE_PERMISSION: '{"*":"ask"}' } }),
  acpTwin(goose, ['acp'], { resumes: true, asks: true, askEnv: { GOOSE_MODE: 'approve' } }),
  // Copilot's ACP mode approves its tools itself: it never asks.
  acpTwin(copilot, ['--acp'], { resumes: true, asks: false }),
  // It approves its own tools unless told not to; then it asks for each, reading included.
  acpTwin(cline, ['--acp'], { resumes: true, asks: true, askArgs: ['--auto-approve', 'false'] }),
];
