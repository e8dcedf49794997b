/** This machine's processes (process-host.ts): process groups, and the run marker in /proc. */
import { processAlive } from './alive';
import { MACHINE } from './machine';
import { treeMemory } from './memory';
import type { HostedRun, ProcessHost } from './process-host';
import { processStartTime, reapEarlierRun } from './process-tree';

/** Whether the recorded process ran here: a pid recorded elsewhere means nothing on this machine. */
const ranHere = (run: HostedRun) => run.process !== undefined && run.process.machine === MACHINE;

export const localHost: ProcessHost = {
  machine: MACHINE,
  kill: async (_run, signal, spawned) => spawned.kill(signal),
  // With no process recorded, its marker still finds what it left.
  reap: async (run) => {
    if (run.process === undefined || ranHere(run)) reapEarlierRun(run.taskId, run.process?.pid, run.process?.startTime);
  },
  memory: async (run) => (run.process && ranHere(run) ? treeMemory(run.process.pid) : 0),
  alive: async (run) => {
    if (run.process === undefined || !ranHere(run)) return false;
    const { pid, startTime } = run.process;
    // Where the start time was read, a pid with another one is another process.
    return startTime === undefined ? processAlive(pid) : processStartTime(pid) === startTime;
  },
};
