import { delimiter, dirname } from 'node:path';
import { defineConfig } from 'vitest/config';

// npm puts node_modules/.bin on the PATH, and the real agent CLIs (dev dependencies) live there:
// tests see only the agents they put on a PATH themselves.
// The Node running the suite comes first, so what a test starts with `node` runs on the version
// under test (npm test runs tiers on several: scripts/test.mjs).
const PATH = [dirname(process.execPath), ...(process.env.PATH ?? '').split(delimiter).filter((dir) => !dir.endsWith('node_modules/.bin'))].join(delimiter);

// Files a tier leaves to another (scripts/test.mjs: a fleet needs a newer Node than the oldest
// supported): added to every project's own exclude, which a command line's --exclude does not reach.
const skipped: string[] = JSON.parse(process.env.HEADLESS_TEST_SKIP ?? '[]');
/** A project's exclude only where there is something to skip: set, it replaces what a command line's --exclude says. */
const skipping = skipped.length > 0 ? { exclude: skipped } : {};

export default defineConfig({
  test: {
    // Generous: a busy machine (CI runs on the developer's own) must not fail a test by its clock.
    testTimeout: 600_000,
    hookTimeout: 600_000,
    // expect.poll's own default is 1 s: a page that takes longer to fetch on a busy machine is not wrong.
    expect: { poll: { timeout: 120_000 } },
    env: { PATH },
    // Real processes and sockets: two cores, so keep files from starving each other.
    maxWorkers: 2,
    fileParallelism: true,
    // Each tier runs by name for a fast inner loop (`npx vitest run --project unit`); npm test runs them all.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], ...skipping } },
      { extends: true, test: { name: 'http', include: ['test/http/**/*.test.ts'], ...skipping } },
      { extends: true, test: { name: 'daemon', include: ['test/daemon/**/*.test.ts'], exclude: ['test/daemon/real-agents*.test.ts', ...skipped] } },
      { extends: true, test: { name: 'real-cli', include: ['test/daemon/real-agents*.test.ts'], ...skipping } },
      { extends: true, test: { name: 'faults', include: ['test/faults/**/*.test.ts'], ...skipping } },
    ],
  },
});
