import { version } from '../../package.json';
import { CALLER_COMMANDS, CALLER_USAGE, caller } from './caller/index';
import { DOCTOR_USAGE, doctor } from './doctor';
import { fail } from './fail';
import { MCP_USAGE, mcp } from './mcp';
import { SERVE_USAGE, serve } from './serve';

/** `headless-run-webhook <command>`: the daemon, the agent check, and the caller commands. */

const SHORT = `Usage: headless-run-webhook <command> [--help] [--version]

Commands:
  serve      run the daemon
  doctor     check the agents each workspace can run
  run        start a run (and wait for it, or follow its events)
  status     show a run
  follow     print a run's events, live until it ends
  logs       print a run's output
  list       list a workspace's runs
  cancel     cancel a run
  inbox      list the Inbox, show an item, or mark it read
  sessions   show or retire a Session
  schedules  list the schedules, or run one now
  triggers   list the triggers, or a trigger's deliveries
  mcp        serve the API as MCP tools over stdio`;

const USAGE = `${SHORT}

${SERVE_USAGE}

${DOCTOR_USAGE}

${Object.values(CALLER_USAGE).join('\n')}

${MCP_USAGE}
(each caller command: --url URL, --json; see "headless-run-webhook run --help")`;

const commands: Record<string, (argv: string[]) => Promise<void>> = {
  serve,
  doctor,
  ...Object.fromEntries(CALLER_COMMANDS.map((name) => [name, (argv: string[]) => caller(name, argv)])),
  mcp,
};

const [command, ...rest] = process.argv.slice(2);
const run = command === undefined ? undefined : commands[command];
if (command === '--version' || (run && rest.includes('--version'))) process.stdout.write(`${version}\n`);
else if (run) run(rest).catch((error: unknown) => fail(error instanceof Error ? error.message : String(error), 1));
else if (command === '--help' || command === '-h') process.stdout.write(`${USAGE}\n`);
else if (command === undefined) fail(`${SHORT}\n\n(each command: --help)`);
else fail(`unknown command "${command}"\n${SHORT}`);
