#!/usr/bin/env node
// `npm test`: build (the daemon tests run dist/), run vitest, then print the plain
// "N passed, N failed" line CI reads (vitest's own summary is not one it recognises).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const bin = (name) => join('node_modules', '.bin', name);
for (const [tool, args] of [['tsc', ['--noEmit']], ['tsup', ['--silent']]]) {
  const step = spawnSync(bin(tool), args, { stdio: 'inherit' });
  if (step.status !== 0) {
    console.log(`0 passed, 1 failed (${tool} failed)`);
    process.exit(1);
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
