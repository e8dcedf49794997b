import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { version } from '../../package.json';
import { onClosedStdout } from './closed-stdout';
import { InboxPushError, pushToInbox, sendResult } from './inbox-client';

/** `headless-inbox push --title T [--file F]`: how an agent pushes its report to the Inbox. */

const USAGE = `Usage: headless-inbox push --title TITLE [--file FILE]
       headless-inbox result '<JSON>'
       headless-inbox --help | --version

push: sends a report to the Inbox of the workspace this run belongs to. The body is read from
FILE, else from standard input.
result: sends this run's answer, JSON matching the outputSchema it was started with (read from
standard input when not given); it says what does not match, else the run ends with it.
Uses HEADLESS_API_URL, HEADLESS_WORKSPACE_ID, HEADLESS_TASK_ID and HEADLESS_RUN_TOKEN, which
every headless run has in its environment.`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--version') {
    process.stdout.write(`${version}\n`);
    return 0;
  }
  if (command === undefined || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (command === 'result') return result(rest);
  if (command !== 'push') {
    process.stderr.write(`unknown command "${command}"\n${USAGE}\n`);
    return 2;
  }
  const { values } = parseArgs({ args: rest, options: { title: { type: 'string' }, file: { type: 'string' } }, strict: true });
  if (!values.title) throw new InboxPushError('--title is required');
  const body = values.file !== undefined ? readFileSync(values.file, 'utf8') : await readStdin();
  const item = await pushToInbox({ title: values.title, body, env: process.env });
  process.stdout.write(`pushed ${item.id}\n`);
  return 0;
}

/** `result '<JSON>'`: the run's answer. */
async function result(args: string[]): Promise<number> {
  if (args.length > 1) throw new InboxPushError('give the answer as one argument (quote it), or on standard input');
  const text = args[0] ?? (await readStdin());
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InboxPushError(`the answer is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  await sendResult({ value, env: process.env });
  process.stdout.write('answer accepted: the run ends with it\n');
  return 0;
}

process.stdout.on('error', onClosedStdout(false));
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`headless-inbox: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
