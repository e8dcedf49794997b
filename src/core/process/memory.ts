import { readFileSync, readdirSync } from 'node:fs';

/** How old a snapshot of the process table may be before it is read again: runs sampled together share one. */
const SNAPSHOT_MS = 250;
const PAGE_BYTES = 4096;

interface Snapshot {
  at: number;
  /** Each process's parent and resident memory, in bytes. */
  processes: Map<number, { ppid: number; rss: number }>;
}

let last: Snapshot | undefined;

/** One pass over /proc: every process's parent and resident set. */
function snapshot(now: number): Snapshot {
  if (last && now - last.at < SNAPSHOT_MS) return last;
  const processes = new Map<number, { ppid: number; rss: number }>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    entries = [];
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      // The fields after the command (which may hold spaces and parentheses) start after its last ')'.
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      processes.set(pid, { ppid: Number(fields[1]), rss: Number(fields[21]) * PAGE_BYTES });
    } catch {
      // Gone meanwhile.
    }
  }
  last = { at: now, processes };
  return last;
}

/** The resident memory of `pid` and every process below it, in bytes (0 where /proc cannot be read). */
export function treeMemory(pid: number, now = Date.now()): number {
  const { processes } = snapshot(now);
  const children = new Map<number, number[]>();
  for (const [child, { ppid }] of processes) children.set(ppid, [...(children.get(ppid) ?? []), child]);
  let total = 0;
  const queue = [pid];
  const seen = new Set<number>();
  while (queue.length > 0) {
    const next = queue.pop() as number;
    if (seen.has(next)) continue;
    seen.add(next);
    total += processes.get(next)?.rss ?? 0;
    queue.push(...(children.get(next) ?? []));
  }
  return total;
}
