#!/usr/bin/env node
// `npm test`: lint, format and layering checks, type check and build (the daemon tests run dist/), make sure Debian's chromium and bubblewrap are there for the
// status-page and sandbox tests, run vitest, then print the plain "N passed, N failed" line CI reads
// (vitest's own summary is not one it recognises).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NODE_VERSIONS, ensureNodes } from './node-versions.mjs';

const bin = (name) => join('node_modules', '.bin', name);
const checks = [
  ['biome', ['check', '--error-on-warnings']],
  ['depcruise', ['src', '--config', '.dependency-cruiser.cjs']],
  ['tsc', ['--noEmit']],
  // The daemon tests run dist/: built again unless it is newer than everything it is built from
  // (as right after `npm install`, whose prepare step built it).
  ...(builtFromNow() ? [] : [['tsup', ['--silent']]]),
];
for (const [tool, args] of checks) {
  const step = spawnSync(bin(tool), args, { stdio: 'inherit' });
  if (step.status !== 0) {
    console.log(`0 passed, 1 failed (${tool} failed)`);
    process.exit(1);
  }
}
if (spawnSync(process.execPath, ['scripts/core-dist.mjs'], { stdio: 'inherit' }).status !== 0) {
  console.log('0 passed, 1 failed (the lean package could not be laid out)');
  process.exit(1);
}

/** Whether dist/ was built after the last change to what it is built from. */
function builtFromNow() {
  const newest = (path) => {
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat) return 0;
    if (!stat.isDirectory()) return stat.mtimeMs;
    return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newest(join(path, name))));
  };
  const built = statSync('dist/cli.cjs', { throwIfNoEntry: false })?.mtimeMs ?? 0;
  return built > Math.max(newest('src'), newest('tsup.config.ts'), newest('package.json'));
}

// The browser test drives Debian's chromium (no browser download: none is reachable here), the
// sandbox tests Debian's bubblewrap, a trigger test Debian's Alertmanager, the approval tests iproute2's ss. As root with apt they are
// installed once; otherwise those tests say they are skipped, except in CI.
const DEBIAN = {
  '/usr/bin/chromium': 'chromium',
  '/usr/bin/bwrap': 'bubblewrap',
  '/usr/bin/prometheus-alertmanager': 'prometheus-alertmanager',
  // ss: who is at the other end of the daemon's Unix socket (an approval answered by a run is refused).
  '/usr/bin/ss': 'iproute2',
};
const missing = Object.entries(DEBIAN)
  .filter(([file]) => !existsSync(file))
  .map(([, name]) => name);
if (missing.length > 0 && process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
  const install = () =>
    spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
      stdio: 'ignore',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    }).status === 0;
  console.log(`installing Debian ${missing.join(', ')} for the status-page, sandbox and trigger tests…`);
  if (!install()) {
    spawnSync('apt-get', ['update'], { stdio: 'ignore' });
    install();
  }
}

// The suite on each supported Node.js (docs/testing.md: Node versions): all of it but the real-CLI
// tier on the Node that runs this (the lowest supported, in CI); the unit and HTTP tiers, the
// store's conformance and the real-CLI tier on the newest; the unit tier on the others.
const nodes = ensureNodes(process.cwd());
if (process.env.CI && Object.keys(nodes).length < NODE_VERSIONS.length) {
  console.log(`0 passed, 1 failed (Node.js ${NODE_VERSIONS.join(' and ')} could not be installed from the registry)`);
  process.exit(1);
}
const REAL_CLI = 'test/daemon/real-agents';
// Every Node runs the same SQLite connection code (Node's own node:sqlite, or its drop-in on Node 20):
// beyond the unit tier, which holds both drivers to it, the store's conformance runs on the newest.
const STORE = 'test/daemon/store.test.ts';
// A fleet (a PostgreSQL store) needs Node 22.12 or later, as its queue's engine pg-boss does
// (docs/decisions.md): what starts one runs on the newest only, where there is a newer one.
const FLEET = [
  'test/daemon/fleet.test.ts',
  'test/daemon/postgres.test.ts',
  'test/daemon/store-migrations.test.ts',
  'test/daemon/store.test.ts',
  'test/daemon/triggers.test.ts',
  'test/faults/postgres-outage.test.ts',
  'test/http/collection.test.ts',
  'test/http/fleet-postgres.test.ts',
];
const [newest, ...others] = Object.entries(nodes).sort(([a], [b]) => b.localeCompare(a, undefined, { numeric: true }));
const fleetOnNewest = newest !== undefined && !atLeast(process.versions.node, '22.12.0');
const runs = [
  // The longest tier: a third worker keeps both cores busy once the others have ended.
  {
    node: process.execPath,
    version: process.versions.node,
    args: newest ? ['--maxWorkers=3'] : [],
    // Left to the newest: through each project's own exclude (vitest.config.ts), which a command line's --exclude does not reach.
    env: newest ? { HEADLESS_TEST_SKIP: JSON.stringify([`${REAL_CLI}*.test.ts`, ...(fleetOnNewest ? FLEET : [])]) } : {},
  },
  ...(newest
    ? [{ node: newest[1], version: newest[0], args: [...new Set(['test/unit', 'test/http', STORE, REAL_CLI, ...(fleetOnNewest ? FLEET : [])])] }]
    : []),
  ...others.map(([version, node]) => ({ node, version, args: ['test/unit'] })),
];

const dir = mkdtempSync(join(tmpdir(), 'hrw-test-'));
// The tiers run side by side: each alone leaves a core idle much of the time (a daemon starting, an
// agent waiting on its mock, a test's one long file), and together they keep both busy. The first
// prints as it goes; the others' output is kept and printed after it, whole.
const env = {
  ...process.env,
  HEADLESS_TEST_NODES: JSON.stringify(nodes),
  // Node 22.1 and later keep what they compile here, so the agent CLIs and daemons the suite
  // starts again and again (the real-CLI tier above all) do not compile their code each time:
  // an eighth of the tier's CPU. Node 20 ignores it.
  NODE_COMPILE_CACHE: join(dir, 'compile-cache'),
};
// Each tier is a process group of its own, so a stop (Ctrl-C, or a `kill` of this process alone)
// reaches all it started, the daemons its tests run among them: this process passes the signal to
// each group and ends by it once the tiers have ended.
const tiers = new Set();
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'])
  process.once(signal, () => {
    for (const child of tiers) {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // Its group has ended already; its exit is on the way.
      }
    }
    const ended = () => (tiers.size === 0 ? process.kill(process.pid, signal) : setTimeout(ended, 100));
    ended();
  });
const results = await Promise.all(runs.map((run, i) => vitest(run, i)));
for (const { title, kept } of results.slice(1)) {
  console.log(title);
  process.stdout.write(Buffer.concat(kept));
}
let passed = 0;
let failed = 0;
let skipped = 0;
for (const { status, report } of results) {
  let tierFailed = 0;
  try {
    const result = JSON.parse(readFileSync(report, 'utf8'));
    passed += result.numPassedTests;
    skipped += result.numPendingTests + result.numTodoTests;
    tierFailed = result.numFailedTests + (result.numRuntimeErrors ?? 0);
    // A file that failed to load counts as a failure even though none of its tests ran.
    tierFailed += result.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0).length;
  } catch {
    tierFailed = 1;
  }
  // A tier that ended badly with no failing test (a crash, an error after the tests) is one failure.
  failed += status !== 0 && tierFailed === 0 ? 1 : tierFailed;
}
rmSync(dir, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);

/** Whether Node.js `version` is `floor` or later. */
function atLeast(version, floor) {
  const [a, b] = [version, floor].map((v) => v.split('.').map(Number));
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] > b[i];
  return true;
}

/** One tier: vitest on `node`, its JSON report in the run's folder; the first prints live, the others' output is kept. */
function vitest({ node, version, args, env: extra = {} }, i) {
  const report = join(dir, `report-${i}.json`);
  const skipping = extra.HEADLESS_TEST_SKIP ? `; leaving to the newest: ${JSON.parse(extra.HEADLESS_TEST_SKIP).join(' ')}` : '';
  const title = `\n— vitest on Node.js ${version}${args.length ? ` (${args.join(' ')}${skipping})` : ''}`;
  const argv = [bin('vitest'), 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...args, ...process.argv.slice(2)];
  if (i === 0) console.log(title);
  const child = spawn(node, argv, { stdio: i === 0 ? 'inherit' : ['ignore', 'pipe', 'pipe'], env: { ...env, ...extra }, detached: true });
  tiers.add(child);
  child.once('exit', () => tiers.delete(child));
  const kept = [];
  child.stdout?.on('data', (chunk) => kept.push(chunk));
  child.stderr?.on('data', (chunk) => kept.push(chunk));
  return new Promise((resolve) => child.on('close', (status) => resolve({ status: status ?? 1, report, title, kept })));
}
