#!/usr/bin/env node
// Lays out the lean package's dist (packages/core, headless-run-webhook-core) from the full
// build: the library's four entries with the type chunks they import, and the two programs the
// handler runs. The same files, not a second build (which would double the type build's time).
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const from = join(root, 'dist');
const to = join(root, 'packages/core/dist');
const ENTRIES = ['index', 'node', 'express', 'deno'];
const PROGRAMS = ['inbox-cli.js', 'sandbox-bridge.js'];

const files = new Set();
const add = (name) => {
  if (files.has(name) || !existsSync(join(from, name))) return;
  files.add(name);
  // A type file names the chunks it imports as './chunk.js' or './chunk.cjs'.
  if (/\.d\.c?ts$/.test(name)) {
    for (const [, chunk, ext] of readFileSync(join(from, name), 'utf8').matchAll(/from '\.\/([^']+)\.(c?js)'/g))
      add(`${chunk}.d.${ext === 'cjs' ? 'cts' : 'ts'}`);
  }
};
for (const entry of ENTRIES) for (const ext of ['js', 'cjs', 'd.ts', 'd.cts', 'js.map', 'cjs.map']) add(`${entry}.${ext}`);
for (const program of PROGRAMS) for (const name of [program, `${program}.map`]) add(name);
const missing = [...ENTRIES.map((e) => `${e}.js`), ...PROGRAMS].filter((name) => !files.has(name));
if (missing.length > 0) {
  console.error(`core-dist: the build has no ${missing.join(', ')}: run tsup first`);
  process.exit(1);
}
rmSync(to, { recursive: true, force: true });
mkdirSync(to, { recursive: true });
for (const name of files) copyFileSync(join(from, name), join(to, name));
