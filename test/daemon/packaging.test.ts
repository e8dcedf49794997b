import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeServer } from '../../src/adapters/node';
import { closeAllHosts, createTestHost } from '../helpers/harness';

/** The published package: packed, installed into a fresh project, loaded both ways; linted. */

const ROOT = resolve(__dirname, '../..');
const run = promisify(execFile);
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

  it('its types check clean in a fresh TypeScript project, without skipLibCheck', () => {
    writeFileSync(
      join(consumer, 'check.ts'),
      [
        "import { createHeadlessHandler, type HeadlessHandlerOptions, type TriggerDefinition } from 'headless-run-webhook';",
        "import { createNodeServer } from 'headless-run-webhook/node';",
        "import { serveDeno } from 'headless-run-webhook/deno';",
        "import { createClient } from 'headless-run-webhook/client';",
        "const options: HeadlessHandlerOptions = { workspaces: [{ id: 'w', path: '/srv/w' }] };",
        'const triggers: TriggerDefinition[] = [];',
        'const handler = createHeadlessHandler({ ...options, triggers });',
        'export const used = [handler.ready, handler.fetch, createNodeServer, serveDeno, createClient];',
        '',
      ].join('\n'),
    );
    // The Express entry's types are Express's own: a host that uses it has @types/express.
    const config = {
      compilerOptions: {
        strict: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        noEmit: true,
        skipLibCheck: false,
        typeRoots: [join(ROOT, 'node_modules/@types')],
        types: ['node'],
      },
      files: ['check.ts'],
    };
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify(config));
    const r = sh(bin('tsc'), ['-p', consumer], consumer);
    expect(r.out.trim()).toBe('');
    expect(r.code).toBe(0);
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
  }, 600_000);
});

describe('the client alone (headless-run-webhook-client)', () => {
  const CLIENT = join(ROOT, 'packages', 'client');
  let project: string;
  let packed: string;
  let server: Server;
  let url: string;

  beforeAll(async () => {
    project = mkdtempSync(join(tmpdir(), 'hrw-client-consumer-'));
    const pack = sh('npm', ['pack', '--ignore-scripts', '--pack-destination', project], CLIENT);
    expect(pack.code, pack.out).toBe(0);
    packed = readdirSync(project).find((f) => f.endsWith('.tgz'))!;
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    const install = sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', `./${packed}`], project);
    expect(install.code, install.out).toBe(0);
    const host = await createTestHost();
    server = createNodeServer(host.handler);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 240_000);

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((done) => server?.close(done));
    await closeAllHosts();
    rmSync(project, { recursive: true, force: true });
  });

  it('installs no server dependency: itself and valibot, nothing else', () => {
    const installed = readdirSync(join(project, 'node_modules')).filter((name) => !name.startsWith('.'));
    expect(installed.sort()).toEqual(['headless-run-webhook-client', 'valibot']);
  });

  it('has the version of the package it comes from', () => {
    const own = JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as { version: string };
    const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(own.version).toBe(root.version);
  });

  it('calls the service, from ESM and from CommonJS', async () => {
    // Run without blocking: the service answering them is in this process.
    const node = async (args: string[]) => (await run(process.execPath, args, { cwd: project, timeout: 60_000 })).stdout.trim();
    const call = `const { items } = await client.inbox.listPage('ws'); console.log('inbox', items.length);`;
    const made = `createClient({ url: '${url}' })`;
    expect(await node(['--input-type=module', '-e', `import { createClient } from 'headless-run-webhook-client'; const client = ${made}; ${call}`])).toBe(
      'inbox 0',
    );
    expect(await node(['-e', `const { createClient } = require('headless-run-webhook-client'); const client = ${made}; (async () => { ${call} })();`])).toBe(
      'inbox 0',
    );
  });

  it('publint and @arethetypeswrong/cli report nothing', () => {
    const lint = sh(bin('publint'), ['--strict'], CLIENT);
    expect(lint.out).toContain('All good!');
    const types = sh(bin('attw'), [join(project, packed)], ROOT);
    expect(types.code, types.out).toBe(0);
  }, 600_000);
});
