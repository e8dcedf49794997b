import type { AgentAdapter } from '../types';
import { claude } from './claude';
import { codex } from './codex';
import { gemini } from './gemini';
import { qwen } from './qwen';
import { opencode } from './opencode';
import { cursor } from './cursor';
import { amp } from './amp';
import { copilot } from './copilot';
import { goose } from './goose';
import { pi } from './pi';
import { cline } from './cline';
import { shell } from './shell';
import { ACP_TWINS } from './acp-twins';

/**
 * The built-in adapters, in the documented order. This order is the selection fallback: when no
 * request, Session, workspace or default names an agent, the first one here that is enabled and
 * installed runs (agents/registry.ts).
 */
export const BUILTIN_AGENTS: readonly AgentAdapter[] = [claude, codex, gemini, qwen, opencode, cursor, amp, copilot, goose, pi, cline, shell, ...ACP_TWINS];
