// The event-latency figure for `npm run bench`: from an agent printing a line (a Claude-style
// message saying when it was printed) to an SSE reader receiving its event. Run by bench/run.mjs.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];

/**
 * Reads a run's SSE stream; for each message that says when it was printed, how long it took to
 * arrive. Over node:http, the lightest reader (100 of them share this process and 2 cores).
 * `answered` settles once the stream has answered, `read` with the latencies once it ends.
 */
function latencies(url) {
  let connected;
  const answered = new Promise((resolve) => {
    connected = resolve;
  });
  const read = new Promise((resolve, reject) => {
    const out = [];
    let text = '';
    get(url, (res) => {
      connected();
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        const now = Date.now();
        text += chunk;
        const frames = text.split('\n\n');
        text = frames.pop();
        for (const f of frames) {
          const at = /"text":"at=(\d+) /.exec(f)?.[1];
          if (at) out.push(now - Number(at));
        }
      });
      res.on('end', () => resolve(out));
    }).on('error', reject);
  });
  return { answered, read };
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
    // Every reader connected before any agent prints: the figure is the events' way, not a connection's.
    await Promise.all(reading.map((r) => r.answered));
    // Every agent started and waiting: they print together, their start-up out of the way.
    for (let i = 0; i < 3000 && readdirSync(gates).length < runs; i++) await new Promise((r) => setTimeout(r, 10));
    writeFileSync(join(gates, 'go'), '');
    const per = await Promise.all(reading.map((r) => r.read));
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
