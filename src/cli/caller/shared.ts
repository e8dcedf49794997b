import type { ParseArgsConfig } from 'node:util';
import type { HeadlessClient, RunRecord } from '../../client/index';
import { type RunStatus, hasEnded } from '../../contract/records';
import { describeEvent, visible } from '../describe';
import { fail } from '../fail';
import { CALLER_USAGE, COMMON } from './usage';

/** What every caller command shares: its options, output, exit codes and the wait for a run's end. */

/** Exit codes a script can branch on. */
export const EXIT = { succeeded: 0, failed: 1, usage: 2, timed_out: 3, cancelled: 4, interrupted: 5, service: 6, expired: 7, stopped: 130 } as const;

export const OPTIONS = {
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
  cursor: { type: 'string' },
  unread: { type: 'boolean' },
  tail: { type: 'string' },
  stderr: { type: 'boolean' },
  after: { type: 'string' },
  title: { type: 'string' },
  worktree: { type: 'boolean' },
  schema: { type: 'string' },
  ref: { type: 'string' },
  push: { type: 'boolean' },
  pr: { type: 'boolean' },
  meta: { type: 'string', multiple: true },
  verify: { type: 'string', multiple: true },
  secret: { type: 'string', multiple: true },
  attempts: { type: 'string' },
  rubric: { type: 'string' },
  always: { type: 'boolean' },
  days: { type: 'string' },
} as const satisfies ParseArgsConfig['options'];

export type Values = {
  [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean;
};

/** `--meta key=value`, as many as given: the run's metadata. */
export function metadataOf(command: string, pairs: string[] | undefined): Record<string, string> | undefined {
  if (!pairs) return undefined;
  return Object.fromEntries(
    pairs.map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) usage(command, `--meta takes key=value, not "${pair}"`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

export type Command = (client: HeadlessClient, args: string[], v: Values) => Promise<number>;

export const usage = (command: string, message: string): never => fail(`${message}\n${CALLER_USAGE[command]}\n${COMMON}`, EXIT.usage);
export const print = (text: string) => process.stdout.write(`${visible(text)}\n`);
export const printJson = (value: unknown) => print(JSON.stringify(value, null, 2));

export function positiveInt(command: string, name: string, value: string | undefined, fallback: number): number;
export function positiveInt(command: string, name: string, value: string | undefined): number | undefined;
export function positiveInt(command: string, name: string, value: string | undefined, fallback?: number): number | undefined {
  if (value === undefined) return fallback;
  if (!/^[1-9]\d*$/.test(value)) usage(command, `--${name} must be a positive integer, not "${value}"`);
  return Number(value);
}

export const workspaceOf = (v: Values) => v.workspace ?? process.env.HEADLESS_WORKSPACE ?? 'default';

export const exitFor = (status: RunStatus): number => (hasEnded(status) ? EXIT[status as Exclude<RunStatus, 'queued' | 'running'>] : EXIT.succeeded);

/**
 * Waits for the run's end: a live progress line for people, each event with `follow`. Ctrl-C
 * stops the waiting, not the run, and says so.
 */
export async function finish(client: HeadlessClient, taskId: string, v: Values, after = 0, announce?: string): Promise<RunRecord> {
  const live = !v.json && !v.follow && process.stderr.isTTY;
  const started = Date.now();
  let count = 0;
  let last = '';
  const progress = () =>
    process.stderr.write(`\r\x1b[K${taskId} running ${((Date.now() - started) / 1000).toFixed(0)}s · ${count} events${last ? ` · ${visible(last)}` : ''}`);
  const ticker = live ? setInterval(progress, 1000) : undefined;
  const interrupted = () => {
    if (live) process.stderr.write('\r\x1b[K');
    fail(`stopped waiting; ${taskId} goes on (see it: headless-run-webhook status ${taskId}; stop it: headless-run-webhook cancel ${taskId})`, EXIT.stopped);
  };
  process.once('SIGINT', interrupted);
  // Said only once Ctrl-C is caught: a caller that reacts to it at once finds the handler there.
  if (announce) process.stderr.write(`${announce}\n`);
  try {
    return await client.wait(taskId, {
      onEvent: (event) => {
        count++;
        last = event.type === 'tool' ? `tool ${String((event.data as { name: string }).name)}` : event.type;
        if (v.follow && event.seq > after) print(v.json ? JSON.stringify(event) : describeEvent(event));
        else if (live) progress();
      },
    });
  } finally {
    process.off('SIGINT', interrupted);
    clearInterval(ticker);
    if (live) process.stderr.write('\r\x1b[K');
  }
}
