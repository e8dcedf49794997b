import { version } from '../../package.json';
import { CALLER_COMMANDS } from './caller/names';
import { onClosedStdout } from './closed-stdout';
import { fail } from './fail';
import { dropOwnDevTools } from './own-dev-tools';

/** `headless-run-webhook <command>`: the daemon, the agent check, and the caller commands. */

const SHORT = `Usage: headless-run-webhook <command> [--help] [--version]

Commands:
  serve      run the daemon
  worker     run agents for a fleet's queued runs (no public API)
  doctor     check the agents each workspace can run
  run        start a run (and wait for it, or follow its events)
  status     show a run
  follow     print a run's events, live until it ends
  logs       print a run's output
  changes    show what a worktree run changed: its files, its branch
  list       list a workspace's runs
  cancel     cancel a run
  message    send a running run's agent a follow-up
  inbox      list the Inbox, show an item, or mark it read
  approvals  list the permission questions runs wait on
  approve    allow a waiting question
  deny       deny a waiting question
  sessions   show or retire a Session
  schedules  list the schedules, or run one now
  triggers   list the triggers, or a trigger's deliveries
  usage      runs, tokens and spend per day, beside the daily limits
  mcp        serve the API as MCP tools over stdio`;

/**
 * The caller commands' module, loaded when one runs. This entry and that module are CommonJS
 * (tsup.config.ts): Node loads a CommonJS file with less CPU than an ES module (3 ms of a command's
 * 50 on Node 22, 13 on Node 20), so they are required; the daemon's commands are modules, imported.
 */
const callerModule = () => require('./caller/index') as typeof import('./caller/index');

/** The whole usage, from each command's module (only `--help` loads them all). */
async function usage(): Promise<string> {
  const { CALLER_USAGE } = callerModule();
  const [{ SERVE_USAGE, WORKER_USAGE }, { DOCTOR_USAGE }, { MCP_USAGE }] = await Promise.all([import('./serve'), import('./doctor'), import('./mcp')]);
  return `${SHORT}

${SERVE_USAGE}

${WORKER_USAGE}

${DOCTOR_USAGE}

${Object.values(CALLER_USAGE).join('\n')}

${MCP_USAGE}
(each caller command: --url URL, --json; see "headless-run-webhook run --help")`;
}

/**
 * Each command's module is loaded when it is run: a caller command (run, status…, which scripts
 * and agents call in loops) never loads the server, the traces' SDK or the store.
 */
const commands: Record<string, (argv: string[]) => Promise<void>> = {
  serve: async (argv) => {
    dropOwnDevTools(__filename);
    return (await import('./serve')).serve(argv);
  },
  worker: async (argv) => {
    dropOwnDevTools(__filename);
    return (await import('./serve')).worker(argv);
  },
  doctor: async (argv) => {
    dropOwnDevTools(__filename);
    return (await import('./doctor')).doctor(argv);
  },
  ...Object.fromEntries(CALLER_COMMANDS.map((name) => [name, async (argv: string[]) => callerModule().caller(name, argv)])),
  mcp: async (argv) => (await import('./mcp')).mcp(argv),
};

// Node 22.1+ keeps the compiled code of every module loaded from here on (in the system's temporary
// folder; NODE_DISABLE_COMPILE_CACHE=1 turns it off): a command called again, as scripts and
// agents do in loops, starts without compiling them again. Node 20 has none.
(process.getBuiltinModule('node:module') as { enableCompileCache?: () => unknown }).enableCompileCache?.();

const [command, ...rest] = process.argv.slice(2);
process.stdout.on('error', onClosedStdout(command === 'serve' || command === 'worker'));
const run = command === undefined ? undefined : commands[command];
if (command === '--version' || (run && rest.includes('--version'))) process.stdout.write(`${version}\n`);
else if (run) run(rest).catch((error: unknown) => fail(error instanceof Error ? error.message : String(error), 1));
else if (command === '--help' || command === '-h')
  usage().then(
    (text) => process.stdout.write(`${text}\n`),
    (error: unknown) => fail(error instanceof Error ? error.message : String(error), 1),
  );
else if (command === undefined) fail(`${SHORT}\n\n(each command: --help)`);
else fail(`unknown command "${command}"\n${SHORT}`);
