// The queue's figures for `npm run bench` (docs/queue-and-schedules.md): pick-up, from a slot
// freeing (the run before ends: its `endedAt`) to the next queued run being taken (`startedAt`,
// the write just before its agent is spawned), read from the records; and the daemon's RSS with
// 1000 runs queued. Run by bench/run.mjs, which passes its helpers.
import { writeFileSync } from 'node:fs';
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
