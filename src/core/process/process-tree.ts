import { existsSync, readFileSync, readdirSync } from 'node:fs';

/**
 * Finding and stopping a run's processes. Every run's environment carries
 * `HEADLESS_TASK_ID=<taskId>`, and `/proc/<pid>/environ` keeps the environment a process was
 * started with, so the marker finds every descendant that kept it, even one that left the
 * process group with setsid, and never an unrelated process that happens to reuse a pid.
 * Linux only; elsewhere these degrade to the process-group signal alone.
 */

export const MARKER_VARIABLE = 'HEADLESS_TASK_ID';

const HAS_PROC = existsSync('/proc/self/stat');

/** Process start time (clock ticks since boot, field 22 of /proc/<pid>/stat), if readable. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses; fields resume after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19];
  } catch {
    return undefined;
  }
}

/** Sends `signal` to a whole process group; a group that is already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** The run marker (`HEADLESS_TASK_ID`) in the start-up environment of process `pid`, if it has one and it is readable. */
export function markerOf(pid: number): string | undefined {
  let environ: string;
  try {
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined;
  }
  const needle = `${MARKER_VARIABLE}=`;
  return environ
    .split('\0')
    .find((variable) => variable.startsWith(needle))
    ?.slice(needle.length);
}

/** Pids of live processes whose start-up environment has `HEADLESS_TASK_ID` in `taskIds`. */
export function findMarkedProcesses(taskIds: ReadonlySet<string>): Map<number, string> {
  const found = new Map<number, string>();
  if (taskIds.size === 0) return found;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return found;
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const value = markerOf(pid);
    if (value !== undefined && taskIds.has(value)) found.set(pid, value);
  }
  return found;
}

/** SIGKILLs every process still carrying one of these runs' markers. Returns how many. */
export function killMarkedProcesses(taskIds: ReadonlySet<string>): number {
  const found = findMarkedProcesses(taskIds);
  for (const pid of found.keys()) signalPid(pid, 'SIGKILL');
  return found.size;
}

/**
 * Kills what is left of a run recorded by an earlier boot. The group is signalled only when
 * its leader is gone (a pgid cannot be reused while any member lives) or is provably the same
 * process (same start time); then every process carrying the run's marker is killed.
 */
export function reapEarlierRun(taskId: string, pid: number | undefined, startTime: string | undefined): void {
  if (pid !== undefined && HAS_PROC) {
    const now = processStartTime(pid);
    if (now === undefined || (startTime !== undefined && now === startTime)) signalGroup(pid, 'SIGKILL');
  }
  killMarkedProcesses(new Set([taskId]));
}
