// The event-latency figure for `npm run bench`: from an agent printing a line (a Claude-style
// message saying when it was printed) to an SSE reader receiving its event. Run by bench/run.mjs.
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { cpuMs } from './proc-cpu.mjs';

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
export async function eventLatency({ daemon, fakeConfig, post, row, tempDir, claudeBin: makeClaudeBin, spawnServer, relayBaseline }) {
  const gates = tempDir();
  const claudeBin = makeClaudeBin();
  const env = {
    ...process.env,
    PATH: `${claudeBin}:${process.env.PATH}`,
    BUSY_EVENTS: '100',
    BUSY_RATE: '50',
    BUSY_STAMP: '1',
    BUSY_GATE: join(gates, 'go'),
  };
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 100, workspaces: [{ id: 'ws', path: '.', agents: ['claude'] }] }), tempDir(), env);
  // Readers connected, then every agent started and waiting, then they print together: the figure
  // is the events' way, not a connection's or an agent's start-up.
  // `pid`'s CPU is taken from the agents' go to the last reader's end.
  const measure = async (urls, pid) => {
    const reading = urls.map(latencies);
    await Promise.all(reading.map((r) => r.answered));
    for (let i = 0; i < 3000 && readdirSync(gates).length < urls.length; i++) await new Promise((r) => setTimeout(r, 10));
    const before = cpuMs(pid);
    writeFileSync(join(gates, 'go'), '');
    const per = await Promise.all(reading.map((r) => r.read));
    const cpu = cpuMs(pid) - before;
    rmSync(join(gates, 'go'));
    for (const f of readdirSync(gates)) rmSync(join(gates, f));
    return { per, cpu };
  };
  for (const runs of [1, 100]) {
    const ids = [];
    for (let i = 0; i < runs; i++) ids.push((await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'stamp', agent: 'claude' })).json()).taskId);
    const { per, cpu } = await measure(
      ids.map((id) => `${d.url}/api/headless/${id}/events`),
      d.pid,
    );
    const all = per.flat();
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
      // The floor on this machine now: the same agents relayed with no work at all.
      const relay = await spawnServer([relayBaseline], { env: { ...env, RUNS: String(runs), AGENT: join(claudeBin, 'claude') } });
      const relayed = await measure(
        Array.from({ length: runs }, (_, n) => `${relay.url}/events/${n}`),
        relay.pid,
      );
      const floor = relayed.per.flat();
      await relay.stop();
      row(
        `event latency, ${runs} runs, the same agents through a relay that does nothing else, p50`,
        `${pct(floor, 50)} ms`,
        '— (the floor)',
        `p99 ${pct(floor, 99)} ms; ours ${(pct(all, 99) / Math.max(1, pct(floor, 99))).toFixed(2)}× its p99`,
        '—',
      );
      // What each event costs the process relaying it (the daemon's bookkeeping of the runs' ends included).
      const perEvent = (ms, events) => `${((ms * 1000) / events.length).toFixed(0)} µs`;
      row(
        `CPU per event in the ${runs}-run burst, the daemon`,
        perEvent(cpu, all),
        `${perEvent(relayed.cpu, floor)} (the relay)`,
        `${(cpu / all.length / Math.max(1e-9, relayed.cpu / floor.length)).toFixed(1)}×`,
        '—',
      );
    }
  }
  await d.stop();
}
