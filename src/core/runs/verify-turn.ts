/**
 * @module The verify loop (docs/verify.md), a turn policy (runs/turn-policy.ts): when a run's agent
 * ends a turn as a success, the service runs the run's checks itself, as its agent runs (its
 * folder, sandbox, network and user), never trusting the agent to say it ran them. While one
 * fails, the same Session is asked again with what failed and its output, bounded three ways: its
 * attempts (`maxAttempts`, and the loop's own `MAX_TURNS`), the run's own time and budget (which
 * every turn and check counts against), and no progress (the same failure twice ends it).
 */
import { shownText } from '../util/text';
import type { CheckResult, GraderVerdict, RunVerify, VerifyAttempt } from '../../contract/records';
import { grade } from './grade-change';
import { CHECK_OUTPUT_DEFAULT, type RunSpec } from '../../contract/run-spec';
import { fenced } from '../util/text';
import { MAX_TURNS, type TurnContext, type TurnDecision, type TurnPolicy, timeLeft } from './turn-policy';

type Verify = NonNullable<RunSpec['verify']>;
type Check = NonNullable<Verify['checks']>[number];

const DEFAULT_ATTEMPTS = 3;
const CHECK_TIMEOUT_DEFAULT = 300_000;

export const verifyTurn: TurnPolicy = {
  name: 'verify',
  async decide(context) {
    const verify = context.record.spec?.verify;
    if (verify === undefined || !context.succeeded) return undefined;
    const before = context.record.verify?.attempts ?? [];
    const attempt = before.length + 1;
    const checks: CheckResult[] = [];
    for (const check of verify.checks ?? []) checks.push(await runCheck(context, check, attempt));
    // The grader judges only work whose checks pass.
    const graded = verify.grader && checks.every((c) => c.passed) ? await grade(context, verify.grader) : undefined;
    if (graded && 'failed' in graded) return graderFailed(context, before, { attempt, checks }, graded.failed);
    const passed = checks.every((c) => c.passed) && graded?.verdict !== 'fail';
    const attempts = [...before, { attempt, passed, checks, ...(graded ? { grader: graded } : {}), at: new Date().toISOString() }];
    const verdict = verdictOf(context, verify, attempts);
    await context.note({ verify: { verdict, attempts } });
    const failing = [...checks.filter((c) => !c.passed).map((c) => c.name), ...(graded?.verdict === 'fail' ? ['grader'] : [])];
    context.event('verify.verdict', { attempt, verdict, failing });
    return decisionOf(verify, verdict, attempts);
  },
};

/** The grader could not judge (it could not start, or gave no answer): the run fails, saying why, and is never asked again for it. */
async function graderFailed(
  context: TurnContext,
  before: VerifyAttempt[],
  last: Pick<VerifyAttempt, 'attempt' | 'checks'>,
  why: string,
): Promise<TurnDecision> {
  const attempts = [...before, { ...last, passed: false, at: new Date().toISOString() }];
  await context.note({ verify: { verdict: 'failed', attempts } });
  context.event('verify.verdict', { attempt: last.attempt, verdict: 'failed', failing: ['grader'] });
  return { end: { status: 'failed', error: { code: 'verify_grader_failed', message: `Its grader could not judge it: ${why}` } } };
}

/** Runs one check as the run's agent runs; one that cannot be started fails, saying why. */
async function runCheck(context: TurnContext, check: Check, attempt: number): Promise<CheckResult> {
  const timeoutMs = Math.max(1, Math.min(check.timeoutMs ?? CHECK_TIMEOUT_DEFAULT, timeLeft(context.record)));
  const chars = check.outputChars ?? CHECK_OUTPUT_DEFAULT;
  let result: CheckResult;
  try {
    const end = await context.run({ what: 'check', command: check.command, timeoutMs, merged: true });
    const { timedOut } = end;
    const passed = end.exitCode === 0 && !end.timedOut && !end.stopped;
    const output = tailOf(`${end.stdout}${end.stderr}`, chars);
    result = { name: check.name, exitCode: end.exitCode, passed, durationMs: end.durationMs, ...(timedOut ? { timedOut: true as const } : {}), output };
  } catch (error) {
    result = { name: check.name, exitCode: null, passed: false, durationMs: 0, output: `it could not be started: ${(error as Error).message}` };
  }
  const { output: _, ...shown } = result;
  context.event('verify.checked', { attempt, ...shown });
  return result;
}

/** The last `chars` characters of a check's output, with what would not show taken out. */
function tailOf(text: string, chars: number): string {
  const clean = shownText(text);
  return clean.length > chars ? `…${clean.slice(-(chars - 1))}` : clean;
}

/** Passed; failed again the same way (stalled); out of attempts, or of turns (failed); or another turn is due (pending). */
function verdictOf(context: TurnContext, verify: Verify, attempts: VerifyAttempt[]): RunVerify['verdict'] {
  const [last, previous] = [attempts.at(-1), attempts.at(-2)];
  if (last?.passed) return 'passed';
  if (previous && !previous.passed && sameFailure(previous, last)) return 'stalled';
  const exhausted = attempts.length >= (verify.maxAttempts ?? DEFAULT_ATTEMPTS) || context.turn >= MAX_TURNS || !context.canContinue;
  return exhausted ? 'failed' : 'pending';
}

const failureOf = (a: VerifyAttempt | undefined) =>
  JSON.stringify([a?.checks.filter((c) => !c.passed).map((c) => [c.name, c.exitCode, c.output]), a?.grader?.verdict === 'fail' ? a.grader.failedCriteria : []]);
const sameFailure = (a: VerifyAttempt, b: VerifyAttempt | undefined) => failureOf(a) === failureOf(b);

function decisionOf(verify: Verify, verdict: RunVerify['verdict'], attempts: VerifyAttempt[]): TurnDecision {
  if (verdict === 'passed') return undefined;
  const last = attempts.at(-1);
  const failing = last?.checks.filter((c) => !c.passed) ?? [];
  const grader = last?.grader?.verdict === 'fail' ? last.grader : undefined;
  const what = [
    ...(failing.length > 0 ? [names(failing)] : []),
    ...(grader ? [`the grader (${grader.failedCriteria.join(', ') || 'no criterion named'})`] : []),
  ].join(', ');
  if (verdict === 'pending') return { next: { prompt: againPrompt(verify, attempts.length, failing, grader), reason: `its checks fail: ${what}` } };
  // Out of attempts, as the caller chose: the run ends as its agent did, the verdict on its record.
  if (verify.onExhausted === 'keep') return undefined;
  const code = verdict === 'stalled' ? 'verify_stalled' : 'verify_failed';
  const why = verdict === 'stalled' ? `failed the same way twice in a row` : `still fail after ${attempts.length} attempt${attempts.length === 1 ? '' : 's'}`;
  return { end: { status: 'failed', error: { code, message: `Its checks ${why}: ${what}.` } } };
}

const names = (checks: CheckResult[]) => checks.map((c) => `${c.name} (${c.timedOut ? 'timed out' : `exit ${c.exitCode ?? 'none'}`})`).join(', ');

/** What the agent is told: which checks fail, how, the tail of their output, and which attempt comes next. */
function againPrompt(verify: Verify, done: number, failing: CheckResult[], grader: GraderVerdict | undefined): string {
  const max = verify.maxAttempts ?? DEFAULT_ATTEMPTS;
  const commands = new Map((verify.checks ?? []).map((c) => [c.name, c.command]));
  const sections = failing.map((c) => {
    const how = c.timedOut ? `did not finish in time` : `exited with ${c.exitCode ?? 'no code (killed)'}`;
    return `Check "${c.name}" (\`${commands.get(c.name)}\`) ${how} after ${(c.durationMs / 1000).toFixed(1)} s. The end of its output:\n${fenced(c.output)}`;
  });
  if (grader) {
    const criteria = grader.failedCriteria.length > 0 ? ` It names these criteria as not met: ${grader.failedCriteria.map((c) => `"${c}"`).join(', ')}.` : '';
    sections.push(`A grader judged your change against the task's rubric and says it fails.${criteria} Its explanation:\n${fenced(grader.explanation)}`);
  }
  return [
    `The service ran this task's checks after your work, and they fail (attempt ${done + 1} of ${max} comes next).`,
    ...sections,
    'Fix the cause in the code, then end your turn: the service runs the checks again itself. Do not weaken, skip or edit the checks.',
  ].join('\n\n');
}
