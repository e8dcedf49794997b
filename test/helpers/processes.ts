import { readFileSync } from 'node:fs';
import { findMarkedProcesses } from '../../src/core/process/process-tree';
import { eventually } from './wait';

/** Alive and not a zombie (this sandbox's PID 1 does not reap orphans). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** SIGKILL is delivered asynchronously: a killed process gets up to 2 s to be gone. */
export const isDead = (pid: number) => eventually(() => !isAlive(pid));

/** Processes still carrying one of these runs' `HEADLESS_TASK_ID`. */
export const markedCount = (taskIds: string[]) => findMarkedProcesses(new Set(taskIds)).size;

/** Whether every process of these runs is gone, given up to 2 s. */
export const noneMarked = (taskIds: string[]) => eventually(() => markedCount(taskIds) === 0);
