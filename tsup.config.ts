import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Plugin } from 'esbuild';
import { type Options, defineConfig } from 'tsup';

/** `import text from './file?raw'`: the file's text, as Vite gives it (the status page's real files). */
const raw: Plugin = {
  name: 'raw',
  setup(build) {
    build.onResolve({ filter: /\?raw$/ }, (args) => ({ path: resolve(args.resolveDir, args.path.slice(0, -'?raw'.length)), namespace: 'raw' }));
    build.onLoad({ filter: /.*/, namespace: 'raw' }, (args) => ({ contents: readFileSync(args.path, 'utf8'), loader: 'text' }));
  },
};

/** How a library entry is built: ESM and CommonJS, with types, for Node 20. */
const LIBRARY = { format: ['esm', 'cjs'], dts: true, clean: true, sourcemap: true, target: 'node20', splitting: false } satisfies Options;

/**
 * The command line's entry loads each command's module when it is run, from a file of its own:
 * `cli.cjs` itself then requires nothing, and a caller command loads two CommonJS files
 * (docs/performance.md).
 */
const COMMAND_FILES: Record<string, string> = {
  './caller/index': './cli-caller.cjs',
  './serve': './cli-serve.js',
  './doctor': './cli-doctor.js',
  './mcp': './cli-mcp.js',
};
const commandsApart: Plugin = {
  name: 'commands-apart',
  setup(build) {
    build.onResolve({ filter: /^\.\// }, (args) => {
      const path = COMMAND_FILES[args.path];
      return path && args.importer.endsWith('src/cli/main.ts') ? { path, external: true } : undefined;
    });
  },
};

export default defineConfig([
  {
    entry: {
      index: 'src/core/index.ts',
      node: 'src/adapters/node.ts',
      express: 'src/adapters/express.ts',
      deno: 'src/adapters/deno.ts',
      client: 'src/client/index.ts',
    },
    ...LIBRARY,
    // `import.meta.url` in the CommonJS build too (runs/inbox-command.ts finds the package by it).
    shims: true,
    esbuildPlugins: [raw],
  },
  {
    // The client alone, as the headless-run-webhook-client package (packages/client): no server code.
    entry: { index: 'src/client/index.ts' },
    outDir: 'packages/client/dist',
    ...LIBRARY,
  },
  {
    // The command line's entry, CommonJS (run, never imported; src/cli/main.ts says why): one file
    // that loads nothing until a command runs.
    entry: { cli: 'src/cli/main.ts' },
    format: ['cjs'],
    target: 'node20',
    sourcemap: true,
    splitting: false,
    banner: { js: '#!/usr/bin/env node' },
    esbuildPlugins: [commandsApart],
  },
  {
    // The daemon's commands, loaded by the entry when run, sharing chunks: a caller command loads
    // neither the server nor the traces' SDK.
    entry: { 'cli-serve': 'src/cli/serve.ts', 'cli-doctor': 'src/cli/doctor.ts', 'cli-mcp': 'src/cli/mcp.ts' },
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    splitting: true,
    esbuildPlugins: [raw],
  },
  {
    // The caller commands (run, status…, which scripts and agents call in loops), one file with
    // the parts of valibot they use: each module more is a few milliseconds of a command's start.
    entry: { 'cli-caller': 'src/cli/caller/index.ts' },
    format: ['cjs'],
    target: 'node20',
    sourcemap: true,
    splitting: false,
    noExternal: ['valibot', 'http-parser-js'],
  },
  {
    // Programs run on their own, each one file (a sandbox is shown these files alone).
    entry: {
      'inbox-cli': 'src/cli/inbox.ts',
      'demo-agent': 'src/cli/demo/program.ts',
      'sandbox-bridge': 'src/core/sandbox/bridge-program.ts',
    },
    format: ['esm'],
    target: 'node20',
    sourcemap: true,
    splitting: false,
    // What `headless-inbox` reads its answer with, inside it: a sandbox sees only these files.
    noExternal: ['http-parser-js'],
    banner: { js: '#!/usr/bin/env node' },
    esbuildPlugins: [raw],
  },
]);
