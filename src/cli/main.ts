import { DOCTOR_USAGE, doctor } from './doctor';
import { fail } from './fail';
import { SERVE_USAGE, serve } from './serve';

/** `headless-run-webhook <command>`: the daemon (`serve`) and the agent check (`doctor`). */

const USAGE = `Usage: headless-run-webhook <command>

Commands:
  serve     run the daemon
  doctor    check the agents each workspace can run

${SERVE_USAGE}

${DOCTOR_USAGE}`;

const commands: Record<string, (argv: string[]) => Promise<void>> = { serve, doctor };

const [command, ...rest] = process.argv.slice(2);
const run = command === undefined ? undefined : commands[command];
if (run) run(rest).catch((error: unknown) => fail(error instanceof Error ? error.message : String(error), 1));
else if (command === undefined || command === '--help' || command === '-h') process.stdout.write(`${USAGE}\n`);
else fail(`unknown command "${command}"\n${USAGE}`);
