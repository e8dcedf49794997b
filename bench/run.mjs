#!/usr/bin/env node
// `npm run bench`: each figure is measured against a baseline taken in the same run (these
// machines are noisy), through the real daemon (dist/cli.cjs, i.e. the node adapter) and the fake
// agent from the tests. Absolute values are printed beside the ratios; nothing is asserted.
// BENCH_PROFILE=1 runs the daemons under `node --cpu-prof` (profiles land in bench/results/);
// BENCH_ONLY=<part of a name> runs only the matching figures; BENCH_RUNS sets the stored runs of the
// scaling figures (default 1M).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { startPostgres } from '../test/fixtures/postgres.mjs';
import { eventLatency } from './event-latency.mjs';
import { queueKill, queueMemory, queuePickup, queuePickupFleet } from './queue.mjs';
import { ensureNodes } from '../scripts/node-versions.mjs';
import { installSize } from './install-size.mjs';
import { triggerBurst } from './triggers.mjs';
import { spawnDaemon, spawnServer } from './spawn-daemon.mjs';
import { cpuMs } from './proc-cpu.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const AGENT = join(ROOT, 'test/fixtures/fake-agent.mjs');
const RESULTS = join(ROOT, 'bench/results');
const PROFILE = process.env.BENCH_PROFILE === '1';
const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
/** Runs in the store for the scaling figures. */
const LARGE = Number(process.env.BENCH_RUNS ?? 1_000_000);
const temps = [];
const children = new Set();
const rows = [];

function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-bench-'));
  temps.push(dir);
  return dir;
}

function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);

/** Keeps a started server to be killed on exit; `stop` ends it with SIGTERM and waits. */
function tracked(child) {
  children.add(child);
  return () =>
    new Promise((done) => {
      child.once('exit', () => {
        children.delete(child);
        done();
      });
      child.kill('SIGTERM');
    });
}

/** Starts the daemon in `dir` with `config`; resolves with its base URL and process. */
async function daemon(config, dir = tempDir(), env = process.env, node = process.execPath) {
  writeFileSync(join(dir, 'headless.config.json'), JSON.stringify(config));
  const flags = PROFILE ? [`--cpu-prof`, `--cpu-prof-dir=${RESULTS}`] : [];
  if (PROFILE) mkdirSync(RESULTS, { recursive: true });
  const { child, url } = await spawnDaemon(dir, flags, env, node);
  return { url, pid: child.pid, dir, stop: tracked(child) };
}

/** A server process of the bench's own, stopped with the others at the end if not before. */
async function trackedServer(args, options) {
  const { child, url } = await spawnServer(args, options);
  return { url, pid: child.pid, stop: tracked(child) };
}

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const post = (url, body) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const fakeConfig = (extra = {}) => ({
  agents: { fake: { command: process.execPath, args: [AGENT, '{prompt}'] } },
  workspaces: [{ id: 'ws', path: '.', agents: ['fake'] }],
  ...extra,
});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load = (url, connections = 10, duration = DURATION) => autocannon({ url, connections, duration });

/** A figure; one without a target (`met` left out) is there to explain another. */
function row(figure, measured, baseline, ratio, target, met) {
  rows.push({ figure, measured, baseline, ratio, target, met: met === undefined ? '—' : met ? 'yes' : 'NO' });
  console.error(`  ${figure}: ${measured} vs ${baseline} → ${ratio} (target ${target})`);
}

// 1. GET /api/headless/:taskId requests/s vs @whatwg-node/server alone answering the same JSON (the
// layer the handler is built on: the target), with a bare node:http server and a Hono route (the
// peer) beside it: each server in a process of its own, as the daemon is, each measured in turn.
async function getThroughput() {
  const d = await daemon(fakeConfig());
  const started = await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x', wait: true })).json();
  const path = `/api/headless/${started.taskId}`;
  const body = await (await fetch(`${d.url}${path}`)).text();
  const baseline = async (mode) => {
    const server = await spawnServer([join(ROOT, 'bench/baseline-server.mjs')], { env: { ...process.env, BODY: body, MODE: mode } });
    return { url: `${server.url}${path}`, stop: tracked(server.child) };
  };
  const bare = await baseline('bare');
  const layer = await baseline('whatwg-node');
  const hono = await baseline('hono');
  const ourUrl = `${d.url}${path}`;
  for (const url of [bare.url, layer.url, hono.url, ourUrl]) await load(url, 10, 1);
  // Alternated, medians of 3: the machine's drift falls on every server alike.
  const runs = { bare: [], layer: [], hono: [], ours: [] };
  for (let i = 0; i < 3; i++) {
    runs.layer.push((await load(layer.url)).requests.average);
    runs.ours.push((await load(ourUrl)).requests.average);
    runs.hono.push((await load(hono.url)).requests.average);
    runs.bare.push((await load(bare.url)).requests.average);
  }
  await Promise.all([bare.stop(), layer.stop(), hono.stop(), d.stop()]);
  const median = (xs) => [...xs].sort((a, b) => a - b)[1];
  const [base, floor, peer, ours] = [median(runs.bare), median(runs.layer), median(runs.hono), median(runs.ours)];
  const layerFigure = `${Math.round(floor)} req/s (@whatwg-node/server alone, own process)`;
  // For reference: these servers answer a constant string, while the daemon authenticates and reads
  // the record. The target is against the fair peer (getFairPeer), which does the same work.
  row('GET /api/headless/:taskId req/s (the daemon, beside constant-string servers)', `${Math.round(ours)} req/s`, layerFigure, (ours / floor).toFixed(2), '—');
  row('the same route on Hono (@hono/node-server), the peer', `${Math.round(peer)} req/s`, layerFigure, (peer / floor).toFixed(2), '—');
  row('the same JSON from bare node:http', `${Math.round(base)} req/s`, layerFigure, (base / floor).toFixed(2), '—');
}

// 1b. The same GET against a fair peer: a Hono route that checks the same bearer token and reads the
// same record from the same SQLite file (the daemon requiring the token from loopback too).
async function getFairPeer() {
  const token = 'a-bench-admin-token-of-at-least-32-characters';
  const d = await daemon(fakeConfig({ localCallers: 'token' }), tempDir(), { ...process.env, HEADLESS_ADMIN_TOKEN: token });
  const headers = { authorization: `Bearer ${token}` };
  const started = await (
    await fetch(`${d.url}/api/workspaces/ws/headless`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{"prompt":"echo x","wait":true}',
    })
  ).json();
  const path = `/api/headless/${started.taskId}`;
  const server = await spawnServer([join(ROOT, 'bench/baseline-server.mjs')], {
    env: { ...process.env, MODE: 'hono-store', TOKEN: token, DB: join(d.dir, '.headless', 'headless.sqlite') },
  });
  const peer = { url: `${server.url}${path}`, stop: tracked(server.child) };
  const peerAnswer = await (await fetch(peer.url, { headers })).json();
  if (peerAnswer.taskId !== started.taskId) throw new Error('the peer does not read the record');
  // Each window also gives the server's CPU per request, which a busy machine moves less.
  const loaded = async (url, pid) => {
    const before = cpuMs(pid);
    const r = await autocannon({ url, connections: 10, duration: DURATION, headers });
    return { rate: r.requests.average, us: ((cpuMs(pid) - before) * 1000) / r.requests.total };
  };
  for (const url of [peer.url, `${d.url}${path}`]) await autocannon({ url, connections: 10, duration: 1, headers });
  const runs = { peer: [], ours: [], peerUs: [], oursUs: [] };
  for (let i = 0; i < 3; i++) {
    const [o, p] = [await loaded(`${d.url}${path}`, d.pid), await loaded(peer.url, server.child.pid)];
    runs.ours.push(o.rate);
    runs.oursUs.push(o.us);
    runs.peer.push(p.rate);
    runs.peerUs.push(p.us);
  }
  await Promise.all([peer.stop(), d.stop()]);
  const [ours, fair, oursUs, peerUs] = [median(runs.ours), median(runs.peer), median(runs.oursUs), median(runs.peerUs)];
  row(
    'GET /api/headless/:taskId req/s with the admin token (the daemon)',
    `${Math.round(ours)} req/s`,
    `${Math.round(fair)} req/s (Hono: same token check, same record read from the same SQLite file)`,
    (ours / fair).toFixed(2),
    '≥ 0.9',
    ours / fair >= 0.9,
  );
  row(
    'the same: CPU per request, the server alone',
    `${oursUs.toFixed(1)} µs`,
    `${peerUs.toFixed(1)} µs (the Hono peer)`,
    `${(oursUs / peerUs).toFixed(2)}×`,
    '—',
  );
}

// 2. Async start → 202 latency p50 vs a bare spawn of the same agent plus one durable write to the same store.
async function startLatency() {
  const N = Number(process.env.BENCH_STARTS ?? 150);
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 64 }));
  const ours = [];
  for (let i = 0; i < N + 10; i++) {
    const t = performance.now();
    const res = await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x' });
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error(`start answered ${res.status}`);
    if (i >= 10) ours.push(performance.now() - t);
  }
  await d.stop();
  const base = await new Promise((done, fail) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench/start-baseline.mjs'), AGENT, d.dir, tempDir(), String(N + 10)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.once('exit', (code) => (code === 0 ? done(JSON.parse(out).slice(10)) : fail(new Error(`baseline exited ${code}`))));
  });
  const ratio = median(ours) / median(base);
  row(
    'async start → 202, p50',
    `${median(ours).toFixed(1)} ms`,
    `${median(base).toFixed(1)} ms (spawn + 1 durable write)`,
    `${ratio.toFixed(2)}×`,
    '≤ 1.3×',
    ratio <= 1.3,
  );
}

// 3. 500 concurrent running runs vs the daemon idle: RSS growth and GET p99 meanwhile.
async function manyRuns() {
  const N = 500;
  // A light agent for this figure: 500 Node processes would measure the machine, not the daemon.
  const d = await daemon({
    maxConcurrentRuns: N,
    agents: { sleeper: { command: 'sleep', args: ['{prompt}'] } },
    workspaces: [{ id: 'ws', path: '.', agents: ['sleeper'] }],
  });
  const first = await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: '0', wait: true })).json();
  const getUrl = `${d.url}/api/headless/${first.taskId}`;
  await load(getUrl, 10, 1);
  const idleRss = rssMb(d.pid);
  const idle = await load(getUrl, 10, 2);
  const ids = [];
  for (let i = 0; i < N; i += 50) {
    const batch = await Promise.all(Array.from({ length: 50 }, () => post(`${d.url}/api/workspaces/ws/headless`, { prompt: '120' }).then((r) => r.json())));
    for (const b of batch) if (!b.taskId) throw new Error(`start failed: ${JSON.stringify(b)}`);
    ids.push(...batch.map((b) => b.taskId));
  }
  const busy = await load(getUrl, 10, DURATION);
  const peak = rssMb(d.pid);
  const list = await (await fetch(`${d.url}/api/headless?wsId=ws&status=running&limit=500`)).json();
  await d.stop();
  const growth = peak - idleRss;
  row(
    `${N} concurrent running runs: RSS growth`,
    `${growth.toFixed(1)} MB (${list.runs.length} running)`,
    `${idleRss.toFixed(1)} MB idle`,
    `+${growth.toFixed(1)} MB`,
    '≤ 100 MB',
    growth <= 100,
  );
  row(
    `${N} concurrent running runs: GET p99`,
    `${busy.latency.p99} ms`,
    `${idle.latency.p99} ms idle`,
    `${busy.latency.p99} ms`,
    '≤ 20 ms',
    busy.latency.p99 <= 20,
  );
}

/**
 * Writes `count` finished run records for workspace `ws` straight into the daemon's SQLite file,
 * in its runs table with their lookup columns, as the daemon itself would have left them
 * (src/core/store/sql-table.ts).
 */
async function seed(dir, count) {
  // A first start makes the tables; the seeded rows then go in beside them.
  const first = await daemon(fakeConfig(), dir);
  await first.stop();
  const { DatabaseSync } = process.getBuiltinModule('node:sqlite') ?? (await import('@photostructure/sqlite'));
  const db = new DatabaseSync(join(dir, '.headless', 'headless.sqlite'));
  const t0 = Date.now() - count * 1000;
  const BATCH = 500;
  db.exec('BEGIN');
  for (let i = 0; i < count; i += BATCH) {
    const rows = [];
    for (let j = i; j < Math.min(count, i + BATCH); j++) {
      const created = new Date(t0 + j * 1000).toISOString();
      const taskId = `run_${(t0 + j * 1000).toString(36).padStart(9, '0')}0000${String(j).padStart(16, '0')}`;
      const status = j % 10 === 0 ? 'failed' : 'succeeded';
      const record = {
        taskId,
        resumeId: `ses_${j}`,
        workspaceId: 'ws',
        agent: 'fake',
        mode: 'async',
        status,
        source: { kind: 'api' },
        createdAt: created,
        endedAt: created,
        durationMs: 1000,
        timeoutMs: 300000,
        exitCode: 0,
        signal: null,
        bootId: 'boot_seed',
      };
      rows.push(taskId, 'ws', status, 'boot_seed', JSON.stringify(record));
    }
    db.prepare(
      `INSERT INTO headless_run (id, grp, bucket, owner, record) VALUES ${Array(rows.length / 5)
        .fill('(?, ?, ?, ?, ?)')
        .join(', ')}`,
    ).run(...rows);
  }
  db.exec('COMMIT');
  db.close();
}

// 4. With 1M runs in the store vs 1k: list page time, start-up time and RSS.
async function listScaling() {
  const measure = async (count) => {
    const dir = tempDir();
    const s = performance.now();
    await seed(dir, count);
    console.error(`  seeded ${count} runs in ${((performance.now() - s) / 1000).toFixed(1)} s`);
    const t = performance.now();
    const d = await daemon(fakeConfig(), dir);
    const boot = performance.now() - t;
    const url = `${d.url}/api/headless?wsId=ws&limit=50`;
    await load(url, 10, 1);
    const rss = rssMb(d.pid);
    const result = await load(url, 10, DURATION);
    const failed = await (await fetch(`${d.url}/api/headless?wsId=ws&status=failed&limit=50`)).json();
    if (failed.runs.length !== 50) throw new Error('status filter page is short');
    await d.stop();
    return { mean: result.latency.mean, rps: result.requests.average, boot, rss };
  };
  const small = await measure(1_000);
  const large = await measure(LARGE);
  const label = LARGE >= 1_000_000 ? `${LARGE / 1_000_000}M` : `${LARGE / 1000}k`;
  const ratio = small.rps / large.rps;
  row(
    `list first page, ${label} runs in the store`,
    `${Math.round(large.rps)} req/s, mean ${large.mean.toFixed(2)} ms`,
    `${Math.round(small.rps)} req/s, mean ${small.mean.toFixed(2)} ms with 1k`,
    `${ratio.toFixed(2)}× (time per page)`,
    '≤ 1.5×',
    ratio <= 1.5,
  );
  row(
    `daemon start-up, ${label} runs in the store`,
    `${(large.boot / 1000).toFixed(2)} s`,
    `${(small.boot / 1000).toFixed(2)} s with 1k`,
    `${(large.boot / 1000).toFixed(2)} s`,
    '≤ 1 s',
    large.boot <= 1000,
  );
  const extra = large.rss - small.rss;
  row(
    `RSS, ${label} runs in the store`,
    `${large.rss.toFixed(1)} MB`,
    `${small.rss.toFixed(1)} MB with 1k`,
    `+${extra.toFixed(1)} MB`,
    '≤ +20 MB',
    extra <= 20,
  );
}

// 5. 4 concurrent 1 GB stdout floods vs the daemon idle: RSS growth and GET p99 meanwhile.
async function floods() {
  const d = await daemon(fakeConfig({ maxConcurrentRuns: 8 }));
  const first = await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x', wait: true })).json();
  const getUrl = `${d.url}/api/headless/${first.taskId}`;
  await load(getUrl, 10, 1);
  const idleRss = rssMb(d.pid);
  const idle = await load(getUrl, 10, 2);
  let peak = idleRss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(d.pid));
  }, 50);
  const t = performance.now();
  const runs = Promise.all(
    Array.from({ length: 4 }, () => post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'flood 1024', wait: true }).then((r) => r.json())),
  );
  const during = await load(getUrl, 10, 3);
  const results = await runs;
  const seconds = (performance.now() - t) / 1000;
  clearInterval(sampler);
  await d.stop();
  if (results.some((r) => r.status !== 'succeeded')) throw new Error('a flood run failed');
  const growth = peak - idleRss;
  row(
    '4 × 1 GB stdout floods: RSS growth',
    `${growth.toFixed(1)} MB (4 GB in ${seconds.toFixed(1)} s)`,
    `${idleRss.toFixed(1)} MB idle`,
    `+${growth.toFixed(1)} MB`,
    '≤ 64 MB',
    growth <= 64,
  );
  row(
    '4 × 1 GB stdout floods: GET p99',
    `${during.latency.p99} ms`,
    `${idle.latency.p99} ms idle`,
    `${during.latency.p99} ms`,
    '≤ 100 ms',
    during.latency.p99 <= 100,
  );
}

/** Follows a run's SSE stream; `stall` stops reading after the first chunk (a reader gone quiet). */
async function follow(url, stall) {
  const res = await fetch(url);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let events = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (stall) return { events: 0, ended: false, cancel: () => reader.cancel() };
    text += decoder.decode(value, { stream: true });
    const frames = text.split('\n\n');
    text = frames.pop();
    events += frames.filter((f) => f.startsWith('id: ')).length;
  }
  return { events, ended: true };
}

/** A folder whose `claude` is bench/busy-claude.mjs. */
function claudeBin() {
  const bin = tempDir();
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bench/busy-claude.mjs')}" "$@"\n`, { mode: 0o755 });
  return bin;
}

// 6. 200 SSE readers (50 of them stalled) on one busy run vs the daemon idle: RSS growth and GET p99 meanwhile.
async function eventReaders() {
  const bin = claudeBin();
  const EVENTS = 3000;
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, BUSY_EVENTS: String(EVENTS), BUSY_RATE: '300' };
  const d = await daemon(fakeConfig({ workspaces: [{ id: 'ws', path: '.', agents: ['fake', 'claude'] }] }), undefined, env);
  const first = await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x', agent: 'fake', wait: true })).json();
  const getUrl = `${d.url}/api/headless/${first.taskId}`;
  await load(getUrl, 10, 1);
  // The baseline is the daemon under the same GET load without the readers: what they add is the figure.
  const sample = () => {
    const state = { peak: rssMb(d.pid) };
    const timer = setInterval(() => {
      state.peak = Math.max(state.peak, rssMb(d.pid));
    }, 50);
    return {
      stop: () => {
        clearInterval(timer);
        return state.peak;
      },
    };
  };
  const quiet = sample();
  const idle = await load(getUrl, 10, DURATION);
  const idleRss = quiet.stop();
  const busy = await (await post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'busy', agent: 'claude' })).json();
  const loud = sample();
  const following = Array.from({ length: 200 }, (_, i) => follow(`${d.url}/api/headless/${busy.taskId}/events`, i % 4 === 3));
  const during = await load(getUrl, 10, DURATION);
  const readers = await Promise.all(following);
  const peak = loud.stop();
  const reading = readers.filter((r) => r.ended);
  const stalled = readers.filter((r) => !r.ended);
  const record = await (await fetch(`${d.url}/api/headless/${busy.taskId}`)).json();
  for (const r of stalled) await r.cancel();
  await d.stop();
  // init → agent.session; each message or tool call → one event; result → usage; plus run.started and run.ended.
  if (record.status !== 'succeeded' || reading.some((r) => r.events !== EVENTS + 4)) throw new Error(`a reader missed events: ${reading.map((r) => r.events)}`);
  const growth = peak - idleRss;
  row(
    '200 SSE readers (50 stalled) on one busy run: RSS growth',
    `${growth.toFixed(1)} MB (${EVENTS} events, ${reading.length} readers got all)`,
    `${idleRss.toFixed(1)} MB under the same GET load`,
    `+${growth.toFixed(1)} MB`,
    '≤ 30 MB',
    growth <= 30,
  );
  row(
    '200 SSE readers on one busy run: GET p99',
    `${during.latency.p99} ms`,
    `${idle.latency.p99} ms without readers`,
    `${during.latency.p99} ms`,
    '≤ 20 ms',
    during.latency.p99 <= 20,
  );
}

// 7. A list page (an index read plus a read of 50 records) and a run record, with the store in PostgreSQL vs in SQLite.
async function postgresStore() {
  const postgres = await startPostgres();
  try {
    const measure = async (env) => {
      const d = await onFleetNode(fakeConfig({ maxConcurrentRuns: 8 }), tempDir(), { ...process.env, ...env });
      for (let i = 0; i < 200; i += 8) {
        await Promise.all(Array.from({ length: 8 }, () => post(`${d.url}/api/workspaces/ws/headless`, { prompt: 'echo x', wait: true })));
      }
      const list = `${d.url}/api/headless?wsId=ws&limit=50`;
      const { runs } = await (await fetch(list)).json();
      const record = `${d.url}/api/headless/${runs[0].taskId}`;
      await load(list, 10, 1);
      const result = { list: await load(list, 10, DURATION), get: await load(record, 10, DURATION) };
      await d.stop();
      return result;
    };
    const sqlite = await measure({});
    const pg = await measure({ HEADLESS_STORE_URL: await postgres.database() });
    for (const [what, key] of [
      ['list page', 'list'],
      ['GET /api/headless/:taskId (an ended run)', 'get'],
    ]) {
      const ratio = pg[key].requests.average / sqlite[key].requests.average;
      row(
        `${what} req/s, store in PostgreSQL`,
        `${Math.round(pg[key].requests.average)} req/s, p99 ${pg[key].latency.p99} ms`,
        `${Math.round(sqlite[key].requests.average)} req/s in SQLite`,
        ratio.toFixed(2),
        '≥ 0.7',
        ratio >= 0.7,
      );
    }
  } finally {
    await postgres.stop();
  }
}

// 8. Async start → 202 p50 on a fleet of three daemons sharing PostgreSQL (starts spread over them) vs one daemon on SQLite.
async function fleetStart() {
  const N = Number(process.env.BENCH_STARTS ?? 150);
  const postgres = await startPostgres();
  const p50 = async (daemons) => {
    const times = [];
    for (let i = 0; i < N + 10; i++) {
      const t = performance.now();
      const res = await post(`${daemons[i % daemons.length].url}/api/workspaces/ws/headless`, { prompt: 'echo x' });
      await res.arrayBuffer();
      if (res.status !== 202) throw new Error(`start answered ${res.status}`);
      if (i >= 10) times.push(performance.now() - t);
    }
    await Promise.all(daemons.map((d) => d.stop()));
    return median(times);
  };
  try {
    const sqlite = await p50([await onFleetNode(fakeConfig({ maxConcurrentRuns: 64 }))]);
    const env = { ...process.env, HEADLESS_STORE_URL: await postgres.database() };
    const fleet = await Promise.all([0, 1, 2].map(() => onFleetNode(fakeConfig({ maxConcurrentRuns: 64 }), tempDir(), env)));
    const pg = await p50(fleet);
    const ratio = pg / sqlite;
    row(
      'async start → 202, p50, fleet of 3 on PostgreSQL',
      `${pg.toFixed(1)} ms`,
      `${sqlite.toFixed(1)} ms (1 daemon on SQLite)`,
      `${ratio.toFixed(2)}×`,
      '≤ 1.5×',
      ratio <= 1.5,
    );
  } finally {
    await postgres.stop();
  }
}

// The caller CLI's start-up: the CPU of `--version` and of a caller command (status, answered
// by a refused connection) against a bare `node -e ''`, as bash's `times` reports it. The commands
// take turns, 31 rounds, and each figure is a median: a drift in the machine's speed meets all alike.
async function cliStartup() {
  // Each Node a user runs: this one, and the others the project installs (scripts/node-versions.mjs).
  for (const [version, node] of [[process.versions.node, process.execPath], ...Object.entries(ensureNodes(ROOT)).filter(([v]) => v !== process.versions.node)])
    cliStartupOn(version, node);
}

/** A child's CPU: bash's `times` prints its children's, truncated to the ms; three runs a sample make that a third of one. */
function childCpu(node, args) {
  const r = spawnSync('bash', ['-c', 'for i in 1 2 3; do "$@" >/dev/null 2>&1; done; times', 'bash', node, ...args], { encoding: 'utf8' });
  const [, children] = r.stdout.trim().split('\n');
  const [user, system] = (children ?? '').split(/\s+/).map((t) => {
    const m = /(\d+)m([\d.]+)s/.exec(t);
    return m ? Number(m[1]) * 60_000 + Number(m[2]) * 1000 : 0;
  });
  return (user + system) / 3;
}

function cliStartupOn(nodeVersion, node) {
  const commands = {
    bare: ['-e', ''],
    version: [join(ROOT, 'dist/cli.cjs'), '--version'],
    status: [join(ROOT, 'dist/cli.cjs'), 'status', 'run_x', '--url', 'http://127.0.0.1:9'],
    // The floor of any command that asks the daemon: Node opening one connection, nothing else.
    socket: ['-e', "require('net').connect(9, '127.0.0.1').on('error', () => {})"],
    // What Node's own http adds to that (the caller's transport before 2026-11-27).
    request: ['-e', "require('http').get('http://127.0.0.1:9').on('error', () => {})"],
  };
  const samples = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
  for (let round = 0; round < 31; round++) for (const [name, args] of Object.entries(commands)) samples[name].push(childCpu(node, args));
  const [bare, version, status, socket, request] = ['bare', 'version', 'status', 'socket', 'request'].map((k) => median(samples[k]));
  const against = `${bare.toFixed(0)} ms bare node -e ''`;
  const on = `(Node ${nodeVersion})`;
  const ratio = (x) => `${(x / bare).toFixed(2)}×`;
  row(`caller CLI start-up: --version, CPU ${on}`, `${version.toFixed(0)} ms`, against, ratio(version), '≤ 1.5×', version / bare <= 1.5);
  row(`caller CLI start-up: a caller command (status), CPU ${on}`, `${status.toFixed(0)} ms`, against, ratio(status), '≤ 1.5×', status / bare <= 1.5);
  row(`bare Node opening one connection (the floor of a caller command), CPU ${on}`, `${socket.toFixed(0)} ms`, against, ratio(socket), '—');
  row(`bare Node sending one request with Node's http, CPU ${on}`, `${request.toFixed(0)} ms`, against, ratio(request), '—');
}

/**
 * The Node a fleet's figures run on, their SQLite baselines with them: a fleet needs 22.12 or later
 * (its queue's engine, pg-boss), so on an older Node it is the newest the tests installed.
 */
function fleetNode() {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 12)) return process.execPath;
  const [newest] = Object.entries(ensureNodes(ROOT)).sort(([a], [b]) => b.localeCompare(a, undefined, { numeric: true }));
  if (!newest) throw new Error('a fleet needs Node.js 22.12 or later, and none is installed');
  return newest[1];
}
const onFleetNode = (config, dir = tempDir(), env = process.env) => daemon(config, dir, env, fleetNode());

const started = Date.now();
for (const [name, fn] of [
  ['cli start-up', cliStartup],
  ['install size', () => installSize({ root: ROOT, row, tempDir })],
  ['GET throughput', getThroughput],
  ['GET fair peer', getFairPeer],
  ['start latency', startLatency],
  ['500 concurrent runs', manyRuns],
  ['list scaling', listScaling],
  ['stdout floods', floods],
  ['event readers', eventReaders],
  ['postgres store', postgresStore],
  ['fleet start', fleetStart],
  ['queue pick-up', () => queuePickup({ daemon, fakeConfig, post, row })],
  ['queue memory', () => queueMemory({ daemon, fakeConfig, post, row, rssMb, tempDir })],
  ['queue pick-up in a fleet', () => queuePickupFleet({ daemon: onFleetNode, fakeConfig, post, row, tempDir, startPostgres })],
  ['queue across kill -9', () => queueKill({ daemon, post, row, tempDir })],
  [
    'event latency',
    () =>
      eventLatency({
        daemon,
        fakeConfig,
        post,
        row,
        tempDir,
        claudeBin,
        relayBaseline: join(ROOT, 'bench/relay-baseline.mjs'),
        spawnServer: trackedServer,
      }),
  ],
  [
    'trigger burst',
    () =>
      triggerBurst({
        daemon,
        // The daemon on this Node and on each the tests installed: the SQLite driver differs (its drop-in on 20, node:sqlite after).
        nodes: [[process.versions.node, process.execPath], ...Object.entries(ensureNodes(ROOT)).filter(([v]) => v !== process.versions.node)],
        row,
        rssMb,
        tempDir,
        baselineServer: join(ROOT, 'bench/baseline-server.mjs'),
        spawnServer: trackedServer,
      }),
  ],
]) {
  if (process.env.BENCH_ONLY && !name.includes(process.env.BENCH_ONLY)) continue;
  console.error(`bench: ${name}…`);
  await fn();
}
console.log(`\nheadless-run-webhook bench — node ${process.version}, ${new Date().toISOString()}, ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
console.log('| Figure | Measured | Baseline (same run) | Ratio / result | Target | Met |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.figure} | ${r.measured} | ${r.baseline} | ${r.ratio} | ${r.target} | ${r.met} |`);
cleanup();
