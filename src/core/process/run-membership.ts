import { readFileSync } from 'node:fs';
import { markerOf } from './process-tree';

/** This instance's running runs: each agent process started (its pid) and each run's marker. */
export interface RunProcesses {
  /** The pid of each run's agent process (bubblewrap's, for a sandboxed run), with its run. */
  pids: ReadonlyMap<number, string>;
  /** The task ids of the runs: the `HEADLESS_TASK_ID` their processes are started with. */
  taskIds: ReadonlySet<string>;
}

/** How far up a process's ancestors are followed: far deeper than any agent's tree. */
const MAX_DEPTH = 64;

/**
 * The run process `pid` belongs to, if any: it, or one of its ancestors, is a run's agent process
 * or carries a running run's marker. A process that left both (a double fork that also cleared
 * its environment) is not found: docs/security.md says what then holds.
 */
export function runOfProcess(pid: number, runs: RunProcesses): string | undefined {
  let current: number | undefined = pid;
  for (let depth = 0; current !== undefined && current > 1 && depth < MAX_DEPTH; depth++) {
    const agentOf = runs.pids.get(current);
    if (agentOf !== undefined) return agentOf;
    const marker = current === process.pid ? undefined : markerOf(current);
    if (marker !== undefined && runs.taskIds.has(marker)) return marker;
    current = parentOf(current);
  }
  return undefined;
}

/** Its parent's pid (field 4 of /proc/<pid>/stat), if readable. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(parent) ? parent : undefined;
  } catch {
    return undefined;
  }
}
