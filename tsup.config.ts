import { defineConfig } from 'tsup';

export default defineConfig([
  {
    entry: {
      index: 'src/core/index.ts',
      node: 'src/adapters/node.ts',
      express: 'src/adapters/express.ts',
      deno: 'src/adapters/deno.ts',
      client: 'src/client/index.ts',
    },
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    sourcemap: true,
    target: 'node20',
    splitting: false,
  },
  {
    // The commands are ESM only: they are run, never imported.
    entry: { cli: 'src/cli/main.ts', 'inbox-cli': 'src/cli/inbox.ts' },
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    splitting: false,
    banner: { js: '#!/usr/bin/env node' },
  },
]);
