#!/usr/bin/env node
// `npm test`: lint, format and layering checks, type check and build (the daemon tests run dist/), make sure Debian's chromium and bubblewrap are there for the
// status-page and sandbox tests, run vitest, then print the plain "N passed, N failed" line CI reads
// (vitest's own summary is not one it recognises).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const bin = (name) => join('node_modules', '.bin', name);
const checks = [
  ['biome', ['check', '--error-on-warnings']],
  ['depcruise', ['src', '--config', '.dependency-cruiser.cjs']],
  ['tsc', ['--noEmit']],
  ['tsup', ['--silent']],
];
for (const [tool, args] of checks) {
  const step = spawnSync(bin(tool), args, { stdio: 'inherit' });
  if (step.status !== 0) {
    console.log(`0 passed, 1 failed (${tool} failed)`);
    process.exit(1);
  }
}

// The browser test drives Debian's chromium (no browser download: none is reachable here), the
// sandbox tests Debian's bubblewrap, a trigger test Debian's Alertmanager. As root with apt they are
// installed once; otherwise those tests say they are skipped, except in CI.
const DEBIAN = { '/usr/bin/chromium': 'chromium', '/usr/bin/bwrap': 'bubblewrap', '/usr/bin/prometheus-alertmanager': 'prometheus-alertmanager' };
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

const dir = mkdtempSync(join(tmpdir(), 'hrw-test-'));
const report = join(dir, 'report.json');
const run = spawnSync(bin('vitest'), ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)], {
  stdio: 'inherit',
});
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const result = JSON.parse(readFileSync(report, 'utf8'));
  passed = result.numPassedTests;
  failed = result.numFailedTests + (result.numRuntimeErrors ?? 0);
  skipped = result.numPendingTests + result.numTodoTests;
  // A file that failed to load counts as a failure even though none of its tests ran.
  failed += result.testResults.filter((f) => f.status === 'failed' && f.assertionResults.length === 0).length;
} catch {
  failed += 1;
}
rmSync(dir, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(run.status !== 0 || failed > 0 || passed === 0 ? 1 : 0);
