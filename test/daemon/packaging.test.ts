import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The published package: packed, installed into a fresh project, loaded both ways; linted. */

const ROOT = resolve(__dirname, '../..');
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);
let consumer: string;
let tarball: string;

function sh(command: string, args: string[], cwd: string) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

beforeAll(() => {
  consumer = mkdtempSync(join(tmpdir(), 'hrw-consumer-'));
  // npm test has just built dist/; `prepare` must not rebuild it under the other test files.
  const pack = sh('npm', ['pack', '--ignore-scripts', '--pack-destination', consumer], ROOT);
  expect(pack.code, pack.out).toBe(0);
  tarball = readdirSync(consumer).find((f) => f.endsWith('.tgz'))!;
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  // Scripts are skipped: loading the library never needs sqlite3, which the daemon loads lazily.
  const install = sh('npm', ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', `./${tarball}`], consumer);
  expect(install.code, install.out).toBe(0);
}, 240_000);

afterAll(() => rmSync(consumer, { recursive: true, force: true }));

const probe = `
  const handler = m.createHeadlessHandler({ workspaces: [{ id: 'w', path: process.cwd() }] });
  const res = await handler.fetch('http://localhost/api/headless?wsId=w', { headers: { host: 'localhost' } }, { remoteAddress: '127.0.0.1' });
  console.log(res.status, typeof node.createNodeServer, typeof express.toExpressMiddleware, typeof deno.serveDeno, typeof client.createClient);
  await handler.close();
`;

describe('packaging', () => {
  it('loads with require() from a CommonJS project', () => {
    const script = `const m = require('headless-run-webhook'); const node = require('headless-run-webhook/node');
      const express = require('headless-run-webhook/express'); const deno = require('headless-run-webhook/deno');
      const client = require('headless-run-webhook/client');
      (async () => { ${probe} })();`;
    const r = sh(process.execPath, ['-e', script], consumer);
    expect(r.out.trim()).toBe('200 function function function function');
  });

  it('loads with import from an ES module', () => {
    const script = `const m = await import('headless-run-webhook'); const node = await import('headless-run-webhook/node');
      const express = await import('headless-run-webhook/express'); const deno = await import('headless-run-webhook/deno');
      const client = await import('headless-run-webhook/client'); ${probe}`;
    const r = sh(process.execPath, ['--input-type=module', '-e', script], consumer);
    expect(r.out.trim()).toBe('200 function function function function');
  });

  it('ships the commands', () => {
    const r = sh(join(consumer, 'node_modules', '.bin', 'headless-run-webhook'), ['--help'], consumer);
    expect(r.out).toContain('Usage: headless-run-webhook serve');
    const inbox = sh(join(consumer, 'node_modules', '.bin', 'headless-inbox'), ['push', '--title', 't'], consumer);
    expect(inbox.code).not.toBe(0);
    expect(inbox.out).toContain('not inside a headless run');
  });

  it('publint reports nothing', () => {
    const r = sh(bin('publint'), ['--strict'], ROOT);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('All good!');
  });

  it('@arethetypeswrong/cli reports nothing', () => {
    const r = sh(bin('attw'), [join(consumer, tarball)], ROOT);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('No problems found');
  }, 120_000);
});
