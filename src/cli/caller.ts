import { type ParseArgsConfig, parseArgs } from 'node:util';
import { HeadlessError, type HeadlessClient, type RunRecord, createClient } from '../client/index';
import { RUN_STATUSES, type RunStatus } from '../contract/records';
import { callerUrl } from './data-dir';
import { fail } from './fail';
import { describeEvent, describeRun, seconds, visible } from './describe';

/**
 * The caller commands (README: Caller CLI): `run`, `status`, `list`, `cancel`, `inbox`,
 * `sessions`, each a thin layer over the typed client. Readable text for people, `--json` for
 * machines; the exit code says how a run ended.
 */

/** Exit codes a script can branch on. */
const EXIT = { succeeded: 0, failed: 1, usage: 2, timed_out: 3, cancelled: 4, interrupted: 5, service: 6 } as const;

const COMMON = `
Common options:
  --url URL      the service (default: $HEADLESS_URL, else the daemon running on this
                 machine's data directory, else http://127.0.0.1:47331)
  --json         print JSON for machines instead of text
  --help, --version
The admin token, when one is needed, is read from HEADLESS_ADMIN_TOKEN.
Exit codes: 0 succeeded (or done), 1 run failed, 2 bad usage, 3 timed out, 4 cancelled,
5 interrupted, 6 the service refused or could not be reached.`;

export const CALLER_USAGE: Record<string, string> = {
  run: `Usage: headless-run-webhook run "<prompt>" [--workspace ID] [--agent NAME] [--resume ID] [--timeout MS] [--wait | --follow]

  --workspace ID  the workspace (default: $HEADLESS_WORKSPACE, else "default")
  --agent NAME    the agent (default: the workspace's choice)
  --resume ID     continue this Session (its resumeId)
  --timeout MS    the run's time limit
  --wait          wait for the end (a live progress line on a terminal)
  --follow        print every event as it comes, then wait for the end`,
  status: 'Usage: headless-run-webhook status <taskId>',
  list: `Usage: headless-run-webhook list [--workspace ID] [--status STATUS] [--limit N]

  --status STATUS  one of ${RUN_STATUSES.join(', ')}
  --limit N        how many, newest first (default 20)`,
  cancel: 'Usage: headless-run-webhook cancel <taskId> [--wait]',
  inbox: `Usage: headless-run-webhook inbox [--workspace ID] [--unread] [--limit N]
       headless-run-webhook inbox read <itemId> [--workspace ID]`,
  sessions: `Usage: headless-run-webhook sessions <resumeId>
       headless-run-webhook sessions retire <resumeId>`,
};

const OPTIONS = {
  url: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
  workspace: { type: 'string' },
  agent: { type: 'string' },
  resume: { type: 'string' },
  timeout: { type: 'string' },
  wait: { type: 'boolean' },
  follow: { type: 'boolean' },
  status: { type: 'string' },
  limit: { type: 'string' },
  unread: { type: 'boolean' },
} as const satisfies ParseArgsConfig['options'];

/** Which options each command takes, beyond the common ones. */
const TAKES: Record<string, Array<keyof typeof OPTIONS>> = {
  run: ['workspace', 'agent', 'resume', 'timeout', 'wait', 'follow'],
  status: [],
  list: ['workspace', 'status', 'limit'],
  cancel: ['wait'],
  inbox: ['workspace', 'unread', 'limit'],
  sessions: [],
};

type Values = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean };

const usage = (command: string, message: string): never => fail(`${message}\n${CALLER_USAGE[command]}\n${COMMON}`, EXIT.usage);
const print = (text: string) => process.stdout.write(`${visible(text)}\n`);
const printJson = (value: unknown) => print(JSON.stringify(value, null, 2));

function positiveInt(command: string, name: string, value: string | undefined, fallback?: number): number | undefined {
  if (value === undefined) return fallback;
  if (!/^[1-9]\d*$/.test(value)) usage(command, `--${name} must be a positive integer, not "${value}"`);
  return Number(value);
}

const workspaceOf = (v: Values) => v.workspace ?? process.env.HEADLESS_WORKSPACE ?? 'default';

/** Waits for the run's end: a live progress line for people, each event with `--follow`. */
async function finish(client: HeadlessClient, taskId: string, v: Values): Promise<RunRecord> {
  const live = !v.json && !v.follow && process.stderr.isTTY;
  const started = Date.now();
  let count = 0;
  let last = '';
  const progress = () =>
    process.stderr.write(`\r\x1b[K${taskId} running ${((Date.now() - started) / 1000).toFixed(0)}s · ${count} events${last ? ` · ${visible(last)}` : ''}`);
  const ticker = live ? setInterval(progress, 1000) : undefined;
  try {
    return await client.wait(taskId, {
      onEvent: (event) => {
        count++;
        last = event.type === 'tool' ? `tool ${String((event.data as { name: string }).name)}` : event.type;
        if (v.follow) print(v.json ? JSON.stringify(event) : describeEvent(event));
        else if (live) progress();
      },
    });
  } finally {
    clearInterval(ticker);
    if (live) process.stderr.write('\r\x1b[K');
  }
}

const exitFor = (status: RunStatus): number => (status === 'running' ? EXIT.succeeded : EXIT[status]);

async function runCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  if (args.length !== 1 || args[0]!.trim() === '') usage('run', 'give the prompt as one argument (quote it)');
  const request = {
    prompt: args[0]!,
    ...(v.agent ? { agent: v.agent } : {}),
    ...(v.resume ? { resumeId: v.resume } : {}),
    ...(v.timeout ? { timeoutMs: positiveInt('run', 'timeout', v.timeout) } : {}),
  };
  const started = await client.start(workspaceOf(v), request);
  if (!v.wait && !v.follow) {
    if (v.json) printJson(started);
    else print(`started ${started.taskId} (session ${started.resumeId})`);
    return EXIT.succeeded;
  }
  if (!v.json) process.stderr.write(`started ${started.taskId} (session ${started.resumeId})\n`);
  const record = await finish(client, started.taskId, v);
  if (v.json && !v.follow) printJson(record);
  else if (!v.json) print(describeRun(record));
  return exitFor(record.status);
}

async function statusCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  if (args.length !== 1) usage('status', 'give one taskId');
  const record = await client.get(args[0]!);
  if (v.json) printJson(record);
  else print(describeRun(record));
  return exitFor(record.status);
}

async function listCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  if (args.length > 0) usage('list', `unexpected argument "${args[0]}"`);
  if (v.status !== undefined && !(RUN_STATUSES as readonly string[]).includes(v.status)) usage('list', `--status must be one of ${RUN_STATUSES.join(', ')}`);
  const limit = positiveInt('list', 'limit', v.limit, 20)!;
  const runs: RunRecord[] = [];
  for await (const run of client.list(workspaceOf(v), { status: v.status as RunStatus | undefined, pageSize: Math.min(limit, 500) })) {
    runs.push(run);
    if (runs.length >= limit) break;
  }
  if (v.json) printJson(runs);
  else for (const r of runs) print(`${r.taskId}  ${r.status.padEnd(11)} ${r.agent.padEnd(9)} ${r.createdAt}  ${seconds(r.durationMs)}`);
  return EXIT.succeeded;
}

async function cancelCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  if (args.length !== 1) usage('cancel', 'give one taskId');
  let record = await client.cancel(args[0]!);
  if (v.wait) record = await client.wait(record.taskId);
  if (v.json) printJson(record);
  else print(v.wait ? describeRun(record) : `cancelling ${record.taskId}`);
  return EXIT.succeeded;
}

async function inboxCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  const workspace = workspaceOf(v);
  if (args[0] === 'read') {
    if (args.length !== 2) usage('inbox', 'give one itemId');
    const item = await client.inbox.markRead(workspace, args[1]!);
    if (v.json) printJson(item);
    else print(`read ${item.id}`);
    return EXIT.succeeded;
  }
  if (args.length > 0 && args[0] !== 'list') usage('inbox', `unknown inbox command "${args[0]}"`);
  const limit = positiveInt('inbox', 'limit', v.limit, 20)!;
  const items = [];
  for await (const item of client.inbox.list(workspace, { unread: v.unread, pageSize: Math.min(limit, 500) })) {
    items.push(item);
    if (items.length >= limit) break;
  }
  if (v.json) printJson(items);
  else for (const i of items) print(`${i.id}  ${i.readAt ? 'read  ' : 'unread'}  ${i.createdAt}  ${i.title}${i.taskId ? `  (${i.taskId})` : ''}`);
  return EXIT.succeeded;
}

async function sessionsCommand(client: HeadlessClient, args: string[], v: Values): Promise<number> {
  const retire = args[0] === 'retire';
  const ids = retire ? args.slice(1) : args;
  if (ids.length !== 1) usage('sessions', 'give one resumeId');
  const session = retire ? await client.sessions.retire(ids[0]!) : await client.sessions.get(ids[0]!);
  if (v.json) printJson(session);
  else
    print(
      `${session.resumeId}  ${session.status}  ${session.agent}  workspace ${session.workspaceId}  ${session.runCount} runs  ${session.resumable ? 'resumable' : 'not resumable'}`,
    );
  return EXIT.succeeded;
}

const COMMANDS: Record<string, (client: HeadlessClient, args: string[], v: Values) => Promise<number>> = {
  run: runCommand,
  status: statusCommand,
  list: listCommand,
  cancel: cancelCommand,
  inbox: inboxCommand,
  sessions: sessionsCommand,
};

export const CALLER_COMMANDS = Object.keys(COMMANDS);

export async function caller(command: string, argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    usage(command, error instanceof Error ? error.message : String(error));
  }
  const v = parsed!.values as Values;
  if (v.help) return void print(`${CALLER_USAGE[command]}\n${COMMON}`);
  const extra = Object.keys(v).find((k) => !['url', 'json', 'help', 'version', ...TAKES[command]!].includes(k));
  if (extra) usage(command, `${command} does not take --${extra}`);
  const client = createClient({ url: v.url ?? callerUrl(process.env), token: process.env.HEADLESS_ADMIN_TOKEN || undefined });
  try {
    process.exitCode = await COMMANDS[command]!(client, parsed!.positionals, v);
  } catch (error) {
    if (!(error instanceof HeadlessError)) throw error;
    if (v.json) printJson({ error: { status: error.status, code: error.code, message: error.message } });
    fail(visible(`${error.code}: ${error.message}`), EXIT.service);
  }
}
