#!/usr/bin/env node
// `npm run soak`: 1000 runs through the real daemon at saturation (4 at once), then checks that
// open fds, RSS and zombie children are back to their baseline. Not part of `npm test`.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawnDaemon } from '../bench/spawn-daemon.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const RUNS = Number(process.env.SOAK_RUNS ?? 1000);
const PARALLEL = 4;
const dir = mkdtempSync(join(tmpdir(), 'hrw-soak-'));
const agent = join(ROOT, 'test/fixtures/fake-agent.mjs');
writeFileSync(
  join(dir, 'headless.config.json'),
  JSON.stringify({
    maxConcurrentRuns: PARALLEL,
    agents: { fake: { command: process.execPath, args: [agent, '{prompt}'] } },
    workspaces: [{ id: 'ws', path: '.', agents: ['fake'] }],
  }),
);

const { child: daemon, url: base } = await spawnDaemon(dir);

const pid = daemon.pid;
const fds = () => readdirSync(`/proc/${pid}/fd`).length;
const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
function zombieChildren() {
  let n = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' && Number(fields[1]) === pid) n += 1;
    } catch {}
  }
  return n;
}
const start = (prompt) =>
  fetch(`${base}/api/workspaces/ws/headless`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, wait: true }),
  }).then((r) => r.json());

async function runMany(count) {
  let next = 0;
  const statuses = {};
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < count) {
        next += 1;
        const record = await start('print 10000; echo done');
        statuses[record.status ?? record.code] = (statuses[record.status ?? record.code] ?? 0) + 1;
      }
    }),
  );
  return statuses;
}

await runMany(40);
await new Promise((r) => setTimeout(r, 2000));
const before = { fds: fds(), rss: rssMb(), zombies: zombieChildren() };
const started = Date.now();
const statuses = await runMany(RUNS);
const seconds = (Date.now() - started) / 1000;
await new Promise((r) => setTimeout(r, 3000));
const after = { fds: fds(), rss: rssMb(), zombies: zombieChildren() };
daemon.kill('SIGTERM');
await new Promise((r) => daemon.once('exit', r));
rmSync(dir, { recursive: true, force: true });

// RSS: Sessions and the list index stay in memory by design (about 1.2 KB of heap per run), and
// the allocator keeps some freed pages; more than 32 MB over 1000 runs would be a leak.
const ok = after.fds <= before.fds + 5 && after.zombies <= before.zombies && after.rss <= before.rss + 32 && statuses.succeeded === RUNS;
console.log(`soak: ${RUNS} runs in ${seconds.toFixed(1)} s (${(RUNS / seconds).toFixed(1)} runs/s), statuses ${JSON.stringify(statuses)}`);
console.log('| measure | before | after |');
console.log('|---|---|---|');
console.log(`| open fds | ${before.fds} | ${after.fds} |`);
console.log(`| RSS (MB) | ${before.rss.toFixed(1)} | ${after.rss.toFixed(1)} |`);
console.log(`| zombie children | ${before.zombies} | ${after.zombies} |`);
console.log(ok ? 'soak: OK' : 'soak: FAILED (fds within +5, no new zombies, RSS within +32 MB, every run succeeded)');
process.exit(ok ? 0 : 1);
