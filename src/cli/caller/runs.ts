import { RUN_STATUSES, type RunStatus } from '../../contract/records';
import { describeRun, seconds, visible } from '../describe';
import { type Command, EXIT, type Values, exitFor, finish, metadataOf, positiveInt, print, printJson, usage, workspaceOf } from './shared';

// Built-ins by getBuiltinModule, as in data-dir.ts.
const { readFileSync } = process.getBuiltinModule('node:fs');

/** The caller commands about runs: run, status, follow, logs, list, cancel. */

const one = (command: string, args: string[], what = 'taskId'): string => {
  const [only] = args;
  if (args.length !== 1 || only === undefined) return usage(command, `give one ${what}`);
  return only;
};

/** `--schema FILE`: the JSON Schema the run's answer must match. */
function schemaFile(file: string): Record<string, unknown> {
  try {
    const schema: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (typeof schema === 'object' && schema !== null && !Array.isArray(schema)) return schema as Record<string, unknown>;
  } catch (error) {
    return usage('run', `--schema ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return usage('run', `--schema ${file} must hold a JSON Schema object`);
}

/** `--verify CMD`, as many as given (each a check, numbered), `--rubric TEXT` (a grader) and `--attempts N`. */
function verifyOf(v: Values): { verify?: { checks?: Array<{ name: string; command: string }>; grader?: { rubric: string }; maxAttempts?: number } } {
  if (!v.verify && !v.rubric) {
    if (v.attempts) return usage('run', '--attempts goes with --verify or --rubric');
    return {};
  }
  const checks = v.verify?.map((command, i) => ({ name: `check ${i + 1}`, command }));
  return {
    verify: {
      ...(checks ? { checks } : {}),
      ...(v.rubric ? { grader: { rubric: v.rubric } } : {}),
      ...(v.attempts ? { maxAttempts: positiveInt('run', 'attempts', v.attempts) } : {}),
    },
  };
}

/**
 * `--secret NAME` gives the run the value of the caller's own variable NAME (never on the command
 * line, where any local user reads it); `--secret NAME=@SECRET` names one of the operator's secrets.
 */
function secretsOf(pairs: string[] | undefined): { secrets?: Record<string, string | { secret: string }> } {
  if (!pairs) return {};
  const secrets: Record<string, string | { secret: string }> = {};
  for (const pair of pairs) {
    const [name = '', named] = pair.split('=@');
    if (named !== undefined) {
      secrets[name] = { secret: named };
      continue;
    }
    if (pair.includes('='))
      return usage('run', `--secret ${pair.split('=')[0]}: give its value in your environment, not on the command line (or NAME=@SECRET for the operator's)`);
    const value = process.env[name];
    if (value === undefined || value === '') return usage('run', `--secret ${name}: the variable ${name} is not set in your environment`);
    secrets[name] = value;
  }
  return { secrets };
}

export const run: Command = async (client, args, v) => {
  const [prompt] = args;
  if (args.length !== 1 || prompt === undefined || prompt.trim() === '') return usage('run', 'give the prompt as one argument (quote it)');
  const request = {
    prompt,
    ...(v.agent ? { agent: v.agent } : {}),
    ...(v.resume ? { resumeId: v.resume } : {}),
    ...(v.timeout ? { timeoutMs: positiveInt('run', 'timeout', v.timeout) } : {}),
    ...(v.title ? { title: v.title } : {}),
    ...(v.meta ? { metadata: metadataOf('run', v.meta) } : {}),
    ...(v.schema ? { outputSchema: schemaFile(v.schema) } : {}),
    ...(v.worktree ? { isolation: 'worktree' as const } : {}),
    ...(v.ref ? { ref: v.ref } : {}),
    ...(v.pr ? { publish: { pullRequest: {} } } : v.push ? { publish: {} } : {}),
    ...verifyOf(v),
    ...secretsOf(v.secret),
  };
  const started = await client.start(workspaceOf(v), request);
  const verb = started.status === 'queued' ? `queued ${started.taskId} at place ${started.queuePosition ?? '?'}` : `started ${started.taskId}`;
  if (!v.wait && !v.follow) {
    if (v.json) printJson(started);
    else print(`${verb} (session ${started.resumeId})`);
    return EXIT.succeeded;
  }
  const said = v.json ? undefined : `${verb} (session ${started.resumeId})`;
  const record = await finish(client, started.taskId, v, 0, said);
  if (v.json && !v.follow) printJson(record);
  else if (!v.json) print(describeRun(record));
  return exitFor(record.status);
};

export const status: Command = async (client, args, v) => {
  const record = await client.get(one('status', args));
  if (v.json) printJson(record);
  else print(describeRun(record));
  return exitFor(record.status);
};

export const follow: Command = async (client, args, v) => {
  const taskId = one('follow', args);
  const after = positiveInt('follow', 'after', v.after, 0);
  const record = await finish(client, taskId, { ...v, follow: true }, after);
  if (!v.json) print(describeRun(record));
  return exitFor(record.status);
};

export const logs: Command = async (client, args, v) => {
  const output = await client.output(one('logs', args), positiveInt('logs', 'tail', v.tail));
  if (v.json) printJson(output);
  else process.stdout.write(visible(v.stderr ? output.stderr : output.stdout));
  if (v.json) return EXIT.succeeded;
  if (!output.retained) process.stderr.write(`(${output.taskId}'s output is no longer kept)\n`);
  else if (output.status === 'running') process.stderr.write(`(${output.taskId} is still running: its output so far)\n`);
  else if (output.truncated) process.stderr.write('(only the tail is shown)\n');
  return EXIT.succeeded;
};

export const changes: Command = async (client, args, v) => {
  const view = await client.changes(one('changes', args));
  if (v.json) printJson(view);
  else process.stdout.write(visible(view.patch));
  if (v.json) return EXIT.succeeded;
  const { branch, base, head, files, worktree } = view.changes;
  process.stderr.write(`(${files.length} files changed on ${branch}, ${base.slice(0, 12)}..${head.slice(0, 12)}${worktree ? `; worktree ${worktree}` : ''})\n`);
  if (view.patchTruncated) process.stderr.write('(the patch was cut at 1 MB: git diff on the branch shows it whole)\n');
  if (view.changes.notCommitted) process.stderr.write(`(not committed: ${visible(view.changes.notCommitted)})\n`);
  return EXIT.succeeded;
};

export const list: Command = async (client, args, v) => {
  if (args.length > 0) usage('list', `unexpected argument "${args[0]}"`);
  if (v.status !== undefined && !(RUN_STATUSES as readonly string[]).includes(v.status)) usage('list', `--status must be one of ${RUN_STATUSES.join(', ')}`);
  const limit = positiveInt('list', 'limit', v.limit, 20);
  if (limit > 500) usage('list', '--limit must be at most 500');
  if ((v.meta?.length ?? 0) > 1) usage('list', 'give one --meta key=value');
  const meta = Object.entries(metadataOf('list', v.meta) ?? {})[0];
  const filter = { status: v.status as RunStatus | undefined, limit, cursor: v.cursor, ...(meta ? { metadata: `${meta[0]}:${meta[1]}` } : {}) };
  const page = await client.listPage(workspaceOf(v), filter);
  if (v.json) printJson(page.runs);
  else
    for (const r of page.runs)
      print(`${r.taskId}  ${r.status.padEnd(11)} ${r.agent.padEnd(9)} ${r.createdAt}  ${seconds(r.durationMs).padEnd(7)} ${r.title ?? ''}`.trimEnd());
  if (page.nextCursor) process.stderr.write(`next page: --cursor ${page.nextCursor}\n`);
  return EXIT.succeeded;
};

export const message: Command = async (client, args, v) => {
  const [taskId, text] = args;
  if (args.length !== 2 || taskId === undefined || text === undefined || text.trim() === '') return usage('message', 'give the taskId and the text (quote it)');
  const taken = await client.message(taskId, text);
  if (v.json) printJson(taken);
  else print(`sent to ${taken.taskId} for its next turn (${taken.messageId})`);
  return EXIT.succeeded;
};

export const cancel: Command = async (client, args, v) => {
  let record = await client.cancel(one('cancel', args));
  if (v.wait) record = await client.wait(record.taskId);
  if (v.json) printJson(record);
  else print(v.wait ? describeRun(record) : `cancelling ${record.taskId}`);
  return EXIT.succeeded;
};
