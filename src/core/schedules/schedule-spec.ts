import { Cron } from 'croner';
import { PROMPT_MAX, SCHEDULE_NAME } from '../../contract/requests';
import type { RunSpec } from '../../contract/run-spec';
import { checkDailyLimits } from '../runs/daily-limits';
import { checkSpecLayer, refuseMovedKeys } from '../runs/run-spec';
import type { DailyLimits } from '../types';

/** A schedule (docs/queue-and-schedules.md): a cron expression that starts a run in a workspace. */
export interface ScheduleDefinition {
  /** Unique; the runs it starts carry it as `schedule`. */
  name: string;
  /** Five fields (or six, with seconds first). */
  cron: string;
  /** IANA time zone the expression is read in. @default "UTC" */
  timezone?: string;
  workspace: string;
  prompt: string;
  /** Its runs' spec, over the workspace's `run` (docs/configuration.md: The run spec): agent, timeout, title, permissions, isolation… */
  run?: RunSpec;
  /** When the run it started last has not ended: `skip` this occurrence, `queue` it behind that run, or `allow` both. @default "skip" */
  overlap?: 'skip' | 'queue' | 'allow';
  /** After the service was down over an occurrence: `skip` it, or run it `once` at start-up. @default "skip" */
  missed?: 'skip' | 'once';
  /** Its runs per day and spend per day (UTC): an occurrence beyond starts nothing. @default none */
  limits?: DailyLimits;
  /** Fire up to this many ms after the occurrence, at random (a fleet of schedules then spreads out). @default 0 */
  jitterMs?: number;
}

/** The expression, read in its time zone; never fires by itself (the scheduler times each firing). */
export const cronOf = (s: ScheduleDefinition): Cron => new Cron(s.cron, { timezone: s.timezone ?? 'UTC', paused: true });

/** Throws, naming the schedule, on settings that cannot work. */
export function checkSchedules(schedules: ScheduleDefinition[], hasWorkspace: (id: string) => boolean | undefined): void {
  const names = new Set<string>();
  for (const s of schedules) {
    const where = `schedule "${s.name}"`;
    if (!SCHEDULE_NAME.test(s.name)) throw new Error(`${where}: its name must match ${SCHEDULE_NAME.source}`);
    if (names.has(s.name)) throw new Error(`${where} is defined twice`);
    names.add(s.name);
    if (hasWorkspace(s.workspace) === false) throw new Error(`${where}: no workspace "${s.workspace}"`);
    if (typeof s.prompt !== 'string' || s.prompt.trim() === '') throw new Error(`${where}: its prompt must not be blank`);
    if (s.prompt.length > PROMPT_MAX) throw new Error(`${where}: its prompt has more than ${PROMPT_MAX} characters`);
    refuseMovedKeys(s, where);
    checkSpecLayer(s.run, where, { agent: true });
    try {
      cronOf(s).nextRun();
    } catch (error) {
      throw new Error(`${where}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (s.overlap !== undefined && !['skip', 'queue', 'allow'].includes(s.overlap)) throw new Error(`${where}: overlap must be skip, queue or allow`);
    if (s.missed !== undefined && !['skip', 'once'].includes(s.missed)) throw new Error(`${where}: missed must be skip or once`);
    checkDailyLimits(s.limits, `${where}: limits`);
    if (s.jitterMs !== undefined && !(Number.isInteger(s.jitterMs) && s.jitterMs >= 0)) throw new Error(`${where}: jitterMs must be a whole number, 0 or more`);
  }
}
