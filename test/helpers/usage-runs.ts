import { RUN_TABLE } from '../../src/core/runs/records';
import { createSqliteStore } from '../../src/core/store/sql-stores';
import { sortableIdBound } from '../../src/core/util/ids';
import type { StoredRun } from '../../src/core/types';
import { storedRun } from './records';

/** A name stored in a record is input: shown, it must stay text (the status page, the CLI). */
export const HOSTILE_NAME = '<img src=x onerror="document.title=\'pwned\'">';

const DAY = 86_400_000;

/**
 * Ended runs of a workspace (`ws` unless said) with known usage, stored in a daemon's data directory before it
 * starts: three today (UTC), one of them estimated, one from a hostile trigger and agent name; one
 * yesterday. Today's totals: 3 runs, 3010 in, 401 out, $0.875, $0.25 of it estimated.
 */
export async function seedUsage(dataDir: string, workspaceId = 'ws'): Promise<{ today: string; yesterday: string }> {
  const now = Date.now();
  const today = now - (now % DAY);
  let n = 0;
  const ended = (time: number, more: Partial<StoredRun>): StoredRun => {
    n += 1;
    const taskId = `${sortableIdBound('run_', time)}${n.toString(36).padStart(4, '0')}${n.toString(16).padStart(16, '0')}`;
    const at = new Date(time).toISOString();
    return storedRun(taskId, { workspaceId, status: 'succeeded', createdAt: at, endedAt: at, durationMs: 1, exitCode: 0, ...more });
  };
  const runs = [
    ended(today, { agent: 'claude', usage: { inputTokens: 1000, outputTokens: 100, costUsd: 0.5 } }),
    ended(today + 1, {
      agent: 'codex',
      source: { kind: 'schedule', name: 'nightly', scheduledFor: new Date(today).toISOString() },
      usage: { inputTokens: 2000, outputTokens: 300, costUsd: 0.25, costEstimated: true },
    }),
    ended(today + 2, {
      agent: HOSTILE_NAME,
      source: { kind: 'trigger', name: HOSTILE_NAME, delivery: 'dlv_1' },
      usage: { inputTokens: 10, outputTokens: 1, costUsd: 0.125 },
    }),
    ended(today - 1, { agent: 'claude', usage: { inputTokens: 5, outputTokens: 5, costUsd: 1 } }),
  ];
  // The daemon's own store (serve's SQLite tables), as it would have written them.
  const store = await createSqliteStore(dataDir);
  const table = store.table(RUN_TABLE);
  await table.load();
  for (const run of runs) await table.put(run.taskId, run);
  await store.close();
  const name = (t: number) => new Date(t).toISOString().slice(0, 10);
  return { today: name(today), yesterday: name(today - DAY) };
}
