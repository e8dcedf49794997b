import type { InboxItem } from '../../contract/records';
import { type Command, EXIT, positiveInt, print, printJson, usage, workspaceOf } from './shared';

/** The caller commands about the Inbox and Sessions. */

const BODY_LINES = 3;

const header = (i: InboxItem) => `${i.id}  ${i.readAt ? 'read  ' : 'unread'}  ${i.createdAt}  ${i.title}${i.taskId ? `  (${i.taskId})` : ''}`;

/** An item in a list: its header, then the start of its body, indented. */
function preview(item: InboxItem): string {
  const lines = item.body.split('\n');
  const shown = lines.slice(0, BODY_LINES).map((line) => `    ${line}`);
  if (lines.length > BODY_LINES) shown.push(`    … (${lines.length - BODY_LINES} more lines: inbox show ${item.id})`);
  return [header(item), ...(item.body === '' ? [] : shown)].join('\n');
}

const itemCommand =
  (name: 'show' | 'read'): Command =>
  async (client, args, v) => {
    const [, itemId] = args;
    if (args.length !== 2 || itemId === undefined) return usage('inbox', 'give one itemId');
    const workspace = workspaceOf(v);
    const item = name === 'show' ? await client.inbox.get(workspace, itemId) : await client.inbox.markRead(workspace, itemId);
    if (v.json) printJson(item);
    else print(name === 'show' ? `${header(item)}\n\n${item.body}` : `read ${item.id}`);
    return EXIT.succeeded;
  };

const listItems: Command = async (client, args, v) => {
  if (args.length > 0 && args[0] !== 'list') usage('inbox', `unknown inbox command "${args[0]}"`);
  const limit = positiveInt('inbox', 'limit', v.limit, 20);
  if (limit > 500) usage('inbox', '--limit must be at most 500');
  const page = await client.inbox.listPage(workspaceOf(v), { unread: v.unread, limit, cursor: v.cursor });
  if (v.json) printJson(page.items);
  else for (const item of page.items) print(preview(item));
  if (page.nextCursor) process.stderr.write(`next page: --cursor ${page.nextCursor}\n`);
  return EXIT.succeeded;
};

const SUBCOMMANDS: Record<string, Command> = { show: itemCommand('show'), read: itemCommand('read') };

export const inbox: Command = (client, args, v) => (SUBCOMMANDS[args[0] ?? ''] ?? listItems)(client, args, v);

export const sessions: Command = async (client, args, v) => {
  const retire = args[0] === 'retire';
  const ids = retire ? args.slice(1) : args;
  const [resumeId] = ids;
  if (ids.length !== 1 || resumeId === undefined) return usage('sessions', 'give one resumeId');
  const session = retire ? await client.sessions.retire(resumeId) : await client.sessions.get(resumeId);
  if (v.json) printJson(session);
  else
    print(
      `${session.resumeId}  ${session.status}  ${session.agent}  workspace ${session.workspaceId}  ${session.runCount} runs  ${session.resumable ? 'resumable' : 'not resumable'}`,
    );
  return EXIT.succeeded;
};
