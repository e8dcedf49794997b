/**
 * @module The first turn policy (runs/turn-policy.ts): the one repair turn of a run whose answer
 * is missing or does not match its `outputSchema` (docs/structured-output.md). The agent is asked
 * again on its session, in the same run, with what was wrong. Never for a run the service
 * stopped, one whose session cannot go on, or one whose model never answered.
 */
import type { AgentVerdict } from '../agents/types';
import { addUsage } from '../agents/parsing/json-lines';
import type { LiveRun } from './live-run';
import { answerInText, judgeAnswer, repairPrompt } from './structured-output';
import type { TurnPolicy } from './turn-policy';

/** The answer of a run: what it sent with `headless-inbox result`, else its CLI's structured output (or final message, for a native one). */
export function answerOf(live: Pick<LiveRun, 'answer'>, verdict: AgentVerdict, native: boolean): { value: unknown } | undefined {
  return live.answer ?? verdict.structured ?? (native ? answerInText(verdict.lastMessage) : undefined);
}

/** The structured-output repair turn: once per run, when its answer is missing or does not match. */
export const repairTurn: TurnPolicy = {
  name: 'structured-output',
  decide({ record, adapter, verdict, answer, asked, canContinue }) {
    const schema = record.outputSchema;
    if (schema === undefined || !canContinue || verdict.answered === false || asked.includes('structured-output')) return undefined;
    const judged = judgeAnswer(schema, answer);
    if ('value' in judged) return undefined;
    return { next: { prompt: repairPrompt(judged.problem, schema, adapter.structuredOutput === 'native'), reason: judged.problem } };
  },
};

/** The verdict of a run after a later turn: that turn's, with the usage of both. */
export function laterTurn(before: AgentVerdict, after: AgentVerdict): AgentVerdict {
  const usage = addUsage(before.usage, after.usage);
  return { ...after, agentSessionId: after.agentSessionId ?? before.agentSessionId, ...(usage ? { usage } : {}) };
}
