/**
 * @module The one repair turn of a run whose answer is missing or does not match its
 * `outputSchema` (docs/structured-output.md): the agent is asked again on the session its first
 * turn printed, in the same run, with what was wrong. Never for a run the service stopped, an
 * agent that cannot resume, or one whose model never answered.
 */
import type { AgentAdapter, AgentVerdict } from '../agents/types';
import { addUsage } from '../agents/parsing/json-lines';
import type { StoredRun } from '../types';
import type { LiveRun } from './live-run';
import { answerInText, judgeAnswer, repairPrompt } from './structured-output';

/** A turn after the first: its prompt, on the agent session the first one printed. */
export interface Turn {
  prompt: string;
  agentSessionId: string;
  /** What was wrong with the answer before. */
  problem: string;
}

/** The answer of a run: what it sent with `headless-inbox result`, else its CLI's structured output (or final message, for a native one). */
export function answerOf(live: Pick<LiveRun, 'answer'>, verdict: AgentVerdict, native: boolean): { value: unknown } | undefined {
  return live.answer ?? verdict.structured ?? (native ? answerInText(verdict.lastMessage) : undefined);
}

/** The repair turn a run's first turn calls for, if any. */
export function repairTurn(run: { record: StoredRun; adapter: AgentAdapter }, live: Pick<LiveRun, 'answer'>, verdict: AgentVerdict): Turn | undefined {
  const schema = run.record.outputSchema;
  const { adapter } = run;
  if (schema === undefined || !adapter.supportsResume || verdict.answered === false || verdict.agentSessionId === undefined) return undefined;
  const native = adapter.structuredOutput === 'native';
  const judged = judgeAnswer(schema, answerOf(live, verdict, native));
  if ('value' in judged) return undefined;
  return { prompt: repairPrompt(judged.problem, schema, native), agentSessionId: verdict.agentSessionId, problem: judged.problem };
}

/** The verdict of a run after a later turn: that turn's, with the usage of both. */
export function laterTurn(before: AgentVerdict, after: AgentVerdict): AgentVerdict {
  const usage = addUsage(before.usage, after.usage);
  return { ...after, agentSessionId: after.agentSessionId ?? before.agentSessionId, ...(usage ? { usage } : {}) };
}
