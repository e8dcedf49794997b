import { APPROVAL_STATUSES, type ApprovalRecord } from '../../contract/records';
import { type Command, EXIT, positiveInt, print, printJson, usage } from './shared';

/** The caller commands about the questions of runs under `permissions: "ask"` (docs/approvals.md). */

/** One question on a line: what, for which run, until when or how it was answered. */
function line(a: ApprovalRecord): string {
  const what = `${a.tool.kind ? `${a.tool.kind}: ` : ''}${a.tool.title}${a.tool.paths.length > 0 ? ` (${a.tool.paths.join(', ')})` : ''}`;
  const state = a.answer
    ? `${a.status} by ${a.answer.by}${a.answer.scope === 'run' ? ' for the run' : ''}`
    : a.status === 'pending'
      ? `pending until ${a.expiresAt}, then ${a.fallback}`
      : a.status;
  // Every argument on its own indented line; a cut request says so.
  const input = (a.tool.input ?? '')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => `\n      ${l}`)
    .join('');
  const cut = a.tool.truncated ? '\n    (cut where marked: not the whole request)' : '';
  return `${a.id}  ${a.taskId}  ${a.agent}  ${state}\n    ${what}${input}${cut}`;
}

export const approvals: Command = async (client, args, v) => {
  if (args.length > 1) usage('approvals', 'give at most one taskId');
  const limit = positiveInt('approvals', 'limit', v.limit, 20);
  if (limit > 500) usage('approvals', '--limit must be at most 500');
  const status = v.status as ApprovalRecord['status'] | undefined;
  if (status !== undefined && !APPROVAL_STATUSES.includes(status)) usage('approvals', `--status must be one of ${APPROVAL_STATUSES.join(', ')}`);
  const page = await client.approvals.list({ workspace: v.workspace, taskId: args[0], status, limit, cursor: v.cursor });
  if (v.json) printJson(page.approvals);
  else if (page.approvals.length === 0) print('no questions');
  else for (const approval of page.approvals) print(line(approval));
  if (page.nextCursor) process.stderr.write(`next page: --cursor ${page.nextCursor}\n`);
  return EXIT.succeeded;
};

const answering =
  (decision: 'allow' | 'deny'): Command =>
  async (client, args, v) => {
    const name = decision === 'allow' ? 'approve' : 'deny';
    const [id] = args;
    if (args.length !== 1 || id === undefined) return usage(name, 'give one approval id');
    const answered = await client.approvals.answer(id, { decision, scope: v.always ? 'run' : 'once' });
    if (v.json) printJson(answered);
    else print(`${answered.status} ${answered.id}${v.always ? ` and every later ${answered.tool.kind ?? 'such'} question of ${answered.taskId}` : ''}`);
    return EXIT.succeeded;
  };

export const approve = answering('allow');
export const deny = answering('deny');
