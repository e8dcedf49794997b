import { resolve } from 'node:path';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentAdapter } from '../../src/core/agents/types';

const SCRIPT = resolve(__dirname, '../fixtures/budget-claude.mjs');
const claude = BUILTIN_AGENTS.find((a) => a.name === 'claude') as AgentAdapter;

/**
 * Claude Code's adapter (its flags, its parser) over test/fixtures/budget-claude.mjs, which
 * prints its stream: a prompt "N" is N model responses with a tool call each, $0.01 apiece.
 */
export const claudeStandIn = (name: string): AgentAdapter => ({
  ...claude,
  name,
  command: process.execPath,
  identity: undefined,
  invocation: (input) => ({ command: process.execPath, args: [SCRIPT, ...claude.invocation(input).args], stdin: input.prompt }),
});
