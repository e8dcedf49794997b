// The event-latency figure for `npm run bench`: from an agent printing a line (a Claude-style
// message saying when it was printed) to an SSE reader receiving its event. Run by bench/run.mjs.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

/** Reads a run's SSE stream; for each message that says when it was printed, how long it took to arrive. */
async function latencies(url) {
  const res = await fetch(url);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const out = [];
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return out;
    const now = Date.now();
    text += decoder.decode(value, { stream: true });
    const frames = text.split('\n\n');
    text = frames.pop();
    for (const f of frames) {
      const at = /"text":"at=(\d+) /.exec(f)?.[1];
      if (at) out.push(now - Number(at));
    }
  }
}

/** From an agent printing a line to an SSE reader receiving its event, with 1 and with 100 runs at once. */
export async function eventLatency({ daemon, fakeConfig, post, row, tempDir, claudeBin }) {
  const gates = tempDir();
  const env = {
    ...process.env,
    PATH: `${claudeBin()}:${process.env.PATH}`,
    BUSY_EVENTS: '100',
    BUSY_RATE: '50',
    BUSY_STAMP: '1',
    BUSY_GATE: join(gates, 'go'),
  };
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 100, workspaces: [{ id: 'ws', path: '.', agents: ['claude'] }] }), tempDir(), env);
  for (const runs of [1, 100]) {
    const ids = [];
    for (let i = 0; i < runs; i++) ids.push((await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'stamp', agent: 'claude' })).json()).taskId);
    const reading = ids.map((id) => latencies(`${d.url}/api/headless/${id}/events`));
    // Every agent started and waiting: they print together, their start-up out of the way.
    for (let i = 0; i < 3000 && readdirSync(gates).length < runs; i++) await new Promise((r) => setTimeout(r, 10));
    writeFileSync(join(gates, 'go'), '');
    const per = await Promise.all(reading);
    const all = per.flat();
    rmSync(join(gates, 'go'));
    for (const f of readdirSync(gates)) rmSync(join(gates, f));
    row(
      `event latency, agent line → SSE reader, ${runs} run${runs > 1 ? 's' : ''}, p50`,
      `${pct(all, 50)} ms`,
      '— (absolute)',
      `p99 ${pct(all, 99)} ms`,
      '≤ 5 ms (p99 ≤ 110 ms)',
      pct(all, 50) <= 5 && pct(all, 99) <= 110,
    );
    if (runs > 1) {
      // Where the tail is: the burst of every agent's first lines at once, or after it.
      const later = per.flatMap((events) => events.slice(20));
      row(`event latency, ${runs} runs, after each run's first 20 events, p50`, `${pct(later, 50)} ms`, '—', `p99 ${pct(later, 99)} ms`, '—');
    }
  }
  await d.stop();
}
