/**
 * @module Agents, together, weigh about as much CPU as the service that relays them. Each agent
 * starts in a session of its own (so the service can stop all it started), and where the kernel
 * weighs CPU by session (Linux's autogroup, on by default in most distributions) each busy agent
 * then counts as much as the whole service: a hundred of them left it a hundredth of the CPU, and
 * their own output waited to be relayed (docs/performance.md). So each agent's session gets a
 * nice value (`/proc/<pid>/autogroup`) that grows with how many agents run: none for one agent,
 * 10 for ten, 19 from about ninety, the weights of CFS stepping by 1.25 a level. Every running
 * agent's session is set again when that number changes (a session's nice value may go down as
 * well as up without privilege, as long as it stays at 0 or more). Each agent's own first thread
 * gets the level of its start too (`setpriority`, for kernels and cgroups without autogroup; that
 * one cannot be taken back without privilege, so it is not).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** The highest nice value: the lowest priority. */
const LOWEST = 19;
/** CFS gives each nice level 1.25 times the weight of the next. */
const STEP = Math.log(1.25);

/** How many nice levels below the service each of `running` agents goes: together they then weigh about one process at the service's level. */
export const levelsBelow = (running: number): number => Math.min(LOWEST, Math.round(Math.log(Math.max(1, running)) / STEP));

export class AgentPriority {
  private readonly live = new Set<number>();
  private level = 0;

  /** A started agent: set to the level its number now calls for, the others too if it changed. */
  started(pid: number): void {
    this.live.add(pid);
    const changed = this.relevel();
    if (!changed) setSession(pid, this.level, ownSession());
    try {
      setPriority(pid, Math.min(LOWEST, getPriority() + this.level));
    } catch {
      // Already gone: its exit is handled where it is awaited.
    }
  }

  /** An agent that exited: the others go up again if fewer now call for it. */
  ended(pid: number): void {
    if (this.live.delete(pid)) this.relevel();
  }

  /** Sets every running agent's session to the level their number calls for, if it changed. */
  private relevel(): boolean {
    const level = levelsBelow(this.live.size);
    if (level === this.level) return false;
    this.level = level;
    const own = ownSession();
    for (const pid of this.live) setSession(pid, level, own);
    return true;
  }
}

/** The service's own session's nice value; undefined where the kernel has no autogroup. */
function ownSession(): number | undefined {
  try {
    return Number(/nice (-?\d+)/.exec(readFileSync('/proc/self/autogroup', 'utf8'))?.[1] ?? 0);
  } catch {
    return undefined;
  }
}

/** The agent's session `level` nice levels below the service's (`own`), where the kernel has autogroup. */
function setSession(pid: number, level: number, own: number | undefined): void {
  if (own === undefined) return;
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(Math.min(LOWEST, own + level)));
  } catch {
    // The agent is gone.
  }
}
