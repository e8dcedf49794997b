/**
 * @module A run's pull request, as its reviewers read it: its title, and a body with the run's
 * last message, its verify verdict, and a link to it. The last message is the agent's (input,
 * never markup): it is shown as written, in a code block its own backticks cannot close, so no
 * mention, link or image in it renders.
 */
import type { RunVerify } from '../../contract/records';

/** Characters of the run's last message the body shows, at most. */
const SUMMARY_MAX = 3000;

export interface RunSummary {
  taskId: string;
  /** The run's own label, if it has one. */
  title?: string;
  lastMessage?: string;
  verify?: RunVerify;
  /** Where a reviewer opens the run. */
  link: string;
  branch: string;
  sha: string;
}

/** The title asked for, else the run's, else one naming the run. */
export const pullRequestTitle = (asked: string | undefined, run: RunSummary): string => asked ?? run.title ?? `headless-run-webhook: run ${run.taskId}`;

/** A fenced block longer than any run of backticks in the text. */
function fenced(text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}text\n${text}\n${fence}`;
}

function verdictLine(verify: RunVerify | undefined): string {
  if (verify === undefined) return 'Checks: none asked.';
  const attempts = verify.attempts.length;
  return `Checks: ${verify.verdict}, after ${attempts} attempt${attempts === 1 ? '' : 's'}.`;
}

/** The body: the summary, the verdict, the run and its commit. */
export function pullRequestBody(run: RunSummary): string {
  const message = run.lastMessage?.trim();
  const summary =
    message === undefined || message === ''
      ? 'The agent left no message.'
      : `The agent's last message:\n\n${fenced(message.length > SUMMARY_MAX ? `${message.slice(0, SUMMARY_MAX)}…` : message)}`;
  const where = `Run [${run.taskId}](${run.link}), branch \`${run.branch}\` at ${run.sha}.`;
  return [summary, verdictLine(run.verify), where, '_Opened by headless-run-webhook._'].join('\n\n');
}
