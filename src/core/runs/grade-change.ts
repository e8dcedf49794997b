/**
 * @module What a verify loop asks its rubric grader (docs/verify.md: A rubric grader): the rubric
 * and the change (the workspace's `git status` and `git diff HEAD`, read as the worker's agent
 * reads, cut where long), never the worker's conversation; and the answer it must give, through
 * structured output, a verdict, the criteria not met, and why.
 */
import type { GraderVerdict } from '../../contract/records';
import type { RunSpec } from '../../contract/run-spec';
import { fenced } from '../util/text';
import { timeLeft, type TurnContext } from './turn-policy';

type Grader = NonNullable<NonNullable<RunSpec['verify']>['grader']>;

const GRADER_TIMEOUT_DEFAULT = 300_000;
/** The change shown to a grader, at most (its start: a diff's first files say what it is). */
const CHANGE_MAX = 60_000;
const EXPLANATION_MAX = 4000;
const DIFF_TIMEOUT_MS = 60_000;

export const GRADER_SCHEMA = {
  type: 'object',
  properties: {
    verdict: { enum: ['pass', 'fail'] },
    failedCriteria: { type: 'array', items: { type: 'string', maxLength: 500 }, maxItems: 50 },
    explanation: { type: 'string', maxLength: 20_000 },
  },
  required: ['verdict', 'failedCriteria', 'explanation'],
  additionalProperties: false,
} as const;

/** Asks the grader; its verdict, or why there is none. */
export async function grade(context: TurnContext, grader: Grader): Promise<GraderVerdict | { failed: string }> {
  const diff = await context.run({
    what: 'diff',
    command: 'git status --short && git -c core.pager=cat diff --no-color --no-ext-diff HEAD',
    timeoutMs: Math.max(1, Math.min(DIFF_TIMEOUT_MS, timeLeft(context.record))),
    merged: true,
  });
  const change = `${diff.stdout}${diff.stderr}`;
  const shown = change.length > CHANGE_MAX ? `${change.slice(0, CHANGE_MAX)}\n… (${change.length - CHANGE_MAX} more characters not shown)` : change;
  const timeoutMs = Math.max(1, Math.min(grader.timeoutMs ?? GRADER_TIMEOUT_DEFAULT, timeLeft(context.record)));
  let answer: Awaited<ReturnType<TurnContext['grade']>>;
  try {
    answer = await context.grade({
      prompt: promptOf(grader.rubric, shown),
      timeoutMs,
      outputSchema: GRADER_SCHEMA,
      ...(grader.agent ? { agent: grader.agent } : {}),
    });
  } catch (error) {
    return { failed: `its run could not start: ${(error as Error).message}` };
  }
  const result = answer.result as { verdict?: 'pass' | 'fail'; failedCriteria?: string[]; explanation?: string } | undefined;
  if (answer.status !== 'succeeded' || result?.verdict === undefined)
    return { failed: `its run ${answer.taskId} ended ${answer.status}${answer.error ? ` (${answer.error.code}: ${answer.error.message})` : ''}` };
  const explanation = (result.explanation ?? '').slice(0, EXPLANATION_MAX);
  return { taskId: answer.taskId, verdict: result.verdict, failedCriteria: result.failedCriteria ?? [], explanation };
}

function promptOf(rubric: string, change: string): string {
  return [
    'You are grading a change someone else made to this workspace, against a rubric. Do not change anything: only read.',
    `The rubric:\n${fenced(rubric)}`,
    // The change is the worker's: fenced so that nothing in it can close its block and pose as the rubric.
    `The change (\`git status --short\`, then \`git diff HEAD\`):\n${fenced(change)}`,
    'Answer "pass" only if every criterion of the rubric is met. Otherwise answer "fail", list each criterion that is not met in failedCriteria, and say in explanation what is missing or wrong, so that whoever made the change can fix it.',
  ].join('\n\n');
}
