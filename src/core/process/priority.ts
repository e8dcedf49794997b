/**
 * @module Agents run at a lower CPU priority than the service that relays them. Each agent starts
 * in a session of its own (so the service can stop all it started), and where the kernel weighs
 * CPU by session (Linux's autogroup, on by default in most distributions) each busy agent then
 * counts as much as the whole service: a hundred of them left it a hundredth of the CPU, and their
 * own output waited to be relayed (docs/performance.md). So each agent's session gets a higher
 * nice value than the service's (`/proc/<pid>/autogroup`), and so does its first thread
 * (`setpriority`, for kernels and cgroups without autogroup; what it starts after inherits it).
 * Raising a nice value needs no privilege.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** The highest nice value: the lowest priority. */
const LOWEST = 19;

/** Puts a started agent (and all it starts) `by` nice levels below the service; 0 leaves it as the service. */
export function lowerPriority(pid: number, by: number): void {
  if (by === 0) return;
  try {
    const own = Number(/nice (-?\d+)/.exec(readFileSync('/proc/self/autogroup', 'utf8'))?.[1] ?? 0);
    writeFileSync(`/proc/${pid}/autogroup`, String(Math.min(LOWEST, own + by)));
  } catch {
    // No autogroup here (another OS, a kernel without it): setpriority alone decides.
  }
  try {
    setPriority(pid, Math.min(LOWEST, getPriority() + by));
  } catch {
    // Already gone: its exit is handled where it is awaited.
  }
}
