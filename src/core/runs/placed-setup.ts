/**
 * @module A placement's setup (placement.ts `PlacedSetup`), run before the run's agent as a
 * confined command (confined-command.ts): as its agent runs, under a watchdog of its own timeout.
 */
import type { ProcessHost } from '../process/process-host';
import { SpawnFailure, type Spawner } from '../process/spawner';
import { clip } from '../util/text';
import { type CommandEnd, runConfined } from './confined-command';
import type { PlacedSetup } from './placement';
import type { SupervisedProcess } from './supervisor';

export interface SetupInput {
  setup: PlacedSetup;
  spawner: Spawner;
  host: ProcessHost;
  run: { taskId: string; data?: unknown };
  /** The run's environment (its marker included). */
  env: Record<string, string>;
  /** Its process, once started: the run's stops stop it. */
  started(proc: SupervisedProcess): void;
}

/** Runs the setup: the placement's data once it succeeded; a SpawnFailure with its code once it failed (and the placement undid itself). */
export async function runPlacedSetup(o: SetupInput): Promise<unknown> {
  const { setup } = o;
  let end: CommandEnd;
  try {
    const env = { ...o.env, ...setup.env };
    end = await runConfined({ ...o, what: 'setup', command: setup.command, cwd: setup.cwd, timeoutMs: setup.timeoutMs, env });
  } catch (error) {
    await setup.failed();
    throw error;
  }
  if (end.exitCode === 0 && end.stopped === undefined) return setup.succeeded();
  await setup.failed();
  const stop = end.stopped;
  const why = stop
    ? stop.reason === 'timeout'
      ? `did not finish within ${setup.timeoutMs} ms`
      : `was stopped (${stop.reason})`
    : `exited with ${end.exitCode ?? end.signal}`;
  throw new SpawnFailure(`${setup.what} ${why}: ${clip(`${end.stdout}${end.stderr}`.trim(), 500)}`, setup.failureCode);
}
