import { HeadlessError, createClient } from '../../client/index';
import { nodeFetch } from '../../client/node-fetch';
import { callerUrl } from '../data-dir';
import { visible } from '../describe';
import { fail } from '../fail';
import { approvals, approve, deny } from './approvals';
import { inbox, sessions } from './inbox';
import { cancel, changes, follow, list, logs, message, run, status } from './runs';
import { schedules } from './schedules';
import { spend } from './spend';
import { triggers } from './triggers';
import { type Command, EXIT, OPTIONS, print, printJson, usage } from './shared';
import type { CallerName } from './names';
import { CALLER_USAGE, COMMON } from './usage';

// Built-ins by getBuiltinModule, as in data-dir.ts.
const { parseArgs } = process.getBuiltinModule('node:util');

/**
 * The caller commands (docs/cli.md), each a thin layer over the typed client. Readable text for
 * people, `--json` for machines; the exit code says how a run ended.
 */

export { CALLER_USAGE };

/** Every caller command: the table of names (names.ts) and this one must agree, which the type checks. */
const COMMANDS: Record<CallerName, { command: Command; takes: Array<keyof typeof OPTIONS> }> = {
  run: {
    command: run,
    takes: [
      'workspace',
      'agent',
      'resume',
      'timeout',
      'wait',
      'follow',
      'title',
      'meta',
      'schema',
      'worktree',
      'ref',
      'push',
      'pr',
      'verify',
      'rubric',
      'attempts',
      'secret',
    ],
  },
  status: { command: status, takes: [] },
  follow: { command: follow, takes: ['after'] },
  logs: { command: logs, takes: ['tail', 'stderr'] },
  changes: { command: changes, takes: [] },
  list: { command: list, takes: ['workspace', 'status', 'limit', 'cursor', 'meta'] },
  cancel: { command: cancel, takes: ['wait'] },
  message: { command: message, takes: [] },
  inbox: { command: inbox, takes: ['workspace', 'unread', 'limit', 'cursor'] },
  approvals: { command: approvals, takes: ['workspace', 'status', 'limit', 'cursor'] },
  approve: { command: approve, takes: ['always'] },
  deny: { command: deny, takes: ['always'] },
  sessions: { command: sessions, takes: [] },
  schedules: { command: schedules, takes: [] },
  triggers: { command: triggers, takes: ['limit', 'cursor'] },
  usage: { command: spend, takes: ['days', 'workspace'] },
};

export async function caller(name: string, argv: string[]): Promise<void> {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    return usage(name, error instanceof Error ? error.message : String(error));
  }
  const v = parsed.values;
  if (v.help) return void print(`${CALLER_USAGE[name]}\n${COMMON}`);
  const known = (COMMANDS as Record<string, (typeof COMMANDS)[CallerName] | undefined>)[name];
  if (!known) return usage(name, `unknown command "${name}"`);
  const { command, takes } = known;
  const extra = Object.keys(v).find((k) => !['url', 'json', 'help', 'version', ...takes].includes(k));
  if (extra) usage(name, `${name} does not take --${extra}`);
  const url = v.url ?? callerUrl(process.env);
  // Node's own http for the one request: not Node's fetch, whose loading costs more than the command.
  const client = createClient({
    url,
    token: process.env.HEADLESS_ADMIN_TOKEN || undefined,
    fetch: nodeFetch(url.startsWith('unix:') ? { socketPath: url.slice(5) } : {}),
  });
  try {
    process.exitCode = await command(client, parsed.positionals, v);
  } catch (error) {
    if (!(error instanceof HeadlessError)) throw error;
    if (v.json) printJson({ error: { status: error.status, code: error.code, message: error.message } });
    fail(visible(`${error.code}: ${error.message}`), EXIT.service);
  }
}
