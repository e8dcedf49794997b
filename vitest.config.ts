import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Real processes and sockets: two cores, so keep files from starving each other.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
