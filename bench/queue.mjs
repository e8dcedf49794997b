// The queue's figures for `npm run bench` (docs/queue-and-schedules.md): pick-up, from a slot
// freeing (the run before ends: its `endedAt`) to the next queued run being taken (`startedAt`,
// the write just before its agent is spawned), read from the records; and the daemon's RSS with
// 1000 runs queued. Run by bench/run.mjs, which passes its helpers.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

async function waitEnded(url, taskId) {
  for (let i = 0; i < 6000; i++) {
    const record = await (await fetch(`${url}/api/headless/${taskId}`)).json();
    if (record.status !== 'queued' && record.status !== 'running') return record;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${taskId} did not end`);
}

/** Pick-up alone: N short runs through one slot; the gaps between one's end and the next one's take. */
export async function queuePickup({ daemon, fakeConfig, post, row }) {
  const N = Number(process.env.BENCH_QUEUED ?? 100);
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 1, queue: { max: N } }));
  const ids = [];
  for (let i = 0; i < N; i++) ids.push((await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x' })).json()).taskId);
  const records = [];
  for (const id of ids) records.push(await waitEnded(d.url, id));
  await d.stop();
  const byStart = records.filter((r) => r.startedAt).sort((a, b) => a.startedAt.localeCompare(b.startedAt));
  const gaps = byStart.slice(1).map((r, i) => Date.parse(r.startedAt) - Date.parse(byStart[i].endedAt));
  const p50 = pct(gaps, 50);
  const p99 = pct(gaps, 99);
  row(
    'queue pick-up alone (slot freed → next taken), p50',
    `${p50} ms`,
    '— (absolute; record timestamps, 1 ms resolution)',
    `p99 ${p99} ms`,
    '≤ 5 ms',
    p50 <= 5,
  );
}

/** RSS with 1000 runs queued behind one held slot, against the same daemon before. */
export async function queueMemory({ daemon, fakeConfig, post, row, rssMb, tempDir }) {
  const gate = join(tempDir(), 'go');
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 1, queue: { max: 1000 } }));
  await post(`${d.url}/api/workspaces/ws/headless`, { prompt: `wait-file ${gate}; echo held` });
  const idle = rssMb(d.pid);
  const prompt = 'Summarise what changed in the repository since yesterday and report it. '.repeat(10);
  for (let i = 0; i < 1000; i++) {
    const res = await post(`${d.url}/api/workspaces/ws/headless`, { prompt });
    if (res.status !== 202) throw new Error(`queued start answered ${res.status}`);
    await res.arrayBuffer();
  }
  const queued = rssMb(d.pid);
  writeFileSync(gate, '');
  await d.stop();
  const growth = queued - idle;
  row(
    'RSS with 1000 runs queued (700-character prompts)',
    `+${growth.toFixed(1)} MB`,
    `${idle.toFixed(1)} MB with none`,
    `+${growth.toFixed(1)} MB`,
    '≤ 20 MB',
    growth <= 20,
  );
}

/** Resolves once the process has exited (bounded). */
async function gone(pid) {
  for (let i = 0; i < 500; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${pid} did not exit`);
}

/** The nearest end before each start: how long a freed slot waited for its next run, wherever it freed. */
function pickupGaps(records) {
  const ends = records.map((r) => Date.parse(r.endedAt)).sort((a, b) => a - b);
  const starts = records.filter((r) => r.startedAt).map((r) => Date.parse(r.startedAt));
  return starts.flatMap((s) => {
    const before = ends.filter((e) => e <= s);
    return before.length === 0 ? [] : [s - before[before.length - 1]];
  });
}

/** Pick-up in a fleet of 3 on PostgreSQL, one slot each, every run queued on the first. */
export async function queuePickupFleet({ daemon, fakeConfig, post, row, tempDir, startPostgres }) {
  const N = Number(process.env.BENCH_QUEUED ?? 100);
  const postgres = await startPostgres();
  try {
    const env = { ...process.env, HEADLESS_STORE_URL: await postgres.database() };
    const fleet = [];
    for (let i = 0; i < 3; i++) fleet.push(await daemon(fakeConfig({ maxConcurrentRuns: 1, queue: { max: N } }), tempDir(), env));
    const ids = [];
    for (let i = 0; i < N; i++) ids.push((await (await post(`${fleet[0].url}/api/workspaces/ws/headless`, { prompt: 'echo x' })).json()).taskId);
    const records = [];
    for (const id of ids) records.push(await waitEnded(fleet[0].url, id));
    await Promise.all(fleet.map((d) => d.stop()));
    const gaps = pickupGaps(records);
    row('queue pick-up, fleet of 3 on PostgreSQL, p50', `${pct(gaps, 50)} ms`, '— (absolute)', `p99 ${pct(gaps, 99)} ms`, '—');
  } finally {
    await postgres.stop();
  }
}

/**
 * 1000 starts into a queue of 1000 behind 4 slots, the daemon killed with SIGKILL after the first
 * 500 were accepted and restarted: every accepted run ends once (those running at the kill
 * `interrupted`, never re-run), none is lost, each agent ran at most once (each appends its own
 * mark to a file), and each life started its runs in the order they were accepted.
 */
export async function queueKill({ daemon, post, row, tempDir }) {
  const dir = tempDir();
  const marks = join(dir, 'marks');
  const agent = { command: process.execPath, args: ['-e', "require('fs').appendFileSync(process.env.MARKS, process.argv[1] + '\\n')", '{prompt}'] };
  const config = {
    agents: { mark: agent },
    workspaces: [{ id: 'ws', path: '.', agents: ['mark'], env: { MARKS: marks } }],
    maxConcurrentRuns: 4,
    queue: { max: 1000 },
  };
  const accepted = [];
  const submit = async (d, from, to) => {
    for (let i = from; i < to; i++) {
      const res = await post(`${d.url}/api/workspaces/ws/headless`, { prompt: `m${i}`, agent: 'mark' });
      if (res.status !== 202) throw new Error(`start ${i} answered ${res.status}`);
      accepted.push({ taskId: (await res.json()).taskId, mark: `m${i}`, life: from === 0 ? 1 : 2 });
    }
  };
  const first = await daemon(config, dir);
  await submit(first, 0, 500);
  process.kill(first.pid, 'SIGKILL');
  await gone(first.pid);
  const second = await daemon(config, dir);
  await submit(second, 500, 1000);
  const records = [];
  for (const a of accepted) records.push({ ...a, record: await waitEnded(second.url, a.taskId) });
  await second.stop();
  const ran = readFileSync(marks, 'utf8').split('\n').filter(Boolean);
  const counts = new Map();
  for (const m of ran) counts.set(m, (counts.get(m) ?? 0) + 1);
  const doubled = [...counts.values()].filter((n) => n > 1).length;
  const lost = records.filter((r) => !['succeeded', 'interrupted'].includes(r.record.status)).length;
  const unran = records.filter((r) => r.record.status === 'succeeded' && counts.get(r.mark) !== 1).length;
  const ordered = [1, 2].every((life) => {
    const starts = records.filter((r) => r.life === life && r.record.startedAt && r.record.status === 'succeeded').map((r) => r.record.startedAt);
    return starts.every((s, i) => i === 0 || starts[i - 1] <= s);
  });
  const interrupted = records.filter((r) => r.record.status === 'interrupted').length;
  const ok = doubled === 0 && lost === 0 && unran === 0 && ordered;
  row(
    '1000 starts into the queue, kill -9 after 500, restart',
    `${records.length} ended (${interrupted} interrupted at the kill), ${doubled} run twice, ${lost} lost, ${ordered ? 'in order' : 'OUT OF ORDER'}`,
    '1000 accepted',
    ok ? 'all kept' : 'NOT KEPT',
    'none lost or doubled, in order',
    ok,
  );
}
