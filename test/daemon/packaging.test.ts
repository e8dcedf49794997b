import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeServer } from '../../src/adapters/node';
import { closeAllHosts, createTestHost } from '../helpers/harness';
import { builtInSqlite, testNodes } from '../helpers/node-versions';

/** The published package: packed, installed into a fresh project, loaded both ways; linted. */

const ROOT = resolve(__dirname, '../..');
const run = promisify(execFile);
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);
let consumer: string;
let tarball: string;

function sh(command: string, args: string[], cwd: string, env = process.env) {
  const r = spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** What a command prints until it says it listens (then it is stopped) or exits. */
function firstWords(command: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const read = (chunk: Buffer) => {
      out += chunk;
      if (/listening on/.test(out)) child.kill('SIGTERM');
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', () => resolve(out));
  });
}

/**
 * Packs `packageDir` (its `prepare` skipped: npm test has just built dist/, which must not be
 * rebuilt under the other test files) and installs it into a fresh project; the project and the tarball.
 */
function packAndInstall(packageDir: string, prefix: string, installFlags: string[] = []): { project: string; tarball: string } {
  const project = mkdtempSync(join(tmpdir(), prefix));
  const pack = sh('npm', ['pack', '--ignore-scripts', '--pack-destination', project], packageDir);
  expect(pack.code, pack.out).toBe(0);
  const tarball = readdirSync(project).find((f) => f.endsWith('.tgz'))!;
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  const install = sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...installFlags, `./${tarball}`], project);
  expect(install.code, install.out).toBe(0);
  return { project, tarball };
}

beforeAll(() => {
  // Scripts are skipped: loading the library never needs a SQLite driver, which the daemon loads lazily.
  ({ project: consumer, tarball } = packAndInstall(ROOT, 'hrw-consumer-', ['--ignore-scripts']));
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

  it('the daemon serves with SQLite on Node 22.13 and later as installed; on Node 20 it says to install @photostructure/sqlite', async () => {
    const cli = join(consumer, 'node_modules', 'headless-run-webhook', 'dist', 'cli.cjs');
    for (const [version, binary] of testNodes()) {
      const dataDir = mkdtempSync(join(tmpdir(), 'hrw-serve-'));
      const said = await firstWords(binary, [cli, 'serve', '--port', '0', '--data-dir', dataDir], consumer);
      rmSync(dataDir, { recursive: true, force: true });
      if (builtInSqlite(version)) expect(said, version).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
      else expect(said, version).toContain('needs the @photostructure/sqlite package, which is not installed: npm install @photostructure/sqlite');
    }
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
    ({ project, tarball: packed } = packAndInstall(CLIENT, 'hrw-client-consumer-'));
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

  it('installs no server dependency: itself, valibot and http-parser-js, nothing else', () => {
    const installed = readdirSync(join(project, 'node_modules')).filter((name) => !name.startsWith('.'));
    expect(installed.sort()).toEqual(['headless-run-webhook-client', 'http-parser-js', 'valibot']);
  });

  it('is what docs/client.md says: about 36 KB in either form, and its dependencies are named', () => {
    const docs = readFileSync(join(ROOT, 'docs', 'client.md'), 'utf8');
    expect(docs).toContain('about 36 KB of unminified code in\neither form');
    expect(docs).toMatch(/two dependencies are valibot[^.]*and http-parser-js/);
    for (const file of ['client.js', 'client.cjs']) {
      const kb = statSync(join(ROOT, 'dist', file)).size / 1024;
      // "About 36": what rounds to it, give or take a fifth.
      expect(kb, file).toBeGreaterThan(29);
      expect(kb, file).toBeLessThan(43);
    }
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

describe('the lean library alone (headless-run-webhook-core)', () => {
  const CORE = join(ROOT, 'packages', 'core');
  let project: string;
  let packed: string;
  const node = (args: string[], env: NodeJS.ProcessEnv = {}, binary = process.execPath) => sh(binary, args, project, { ...process.env, ...env });

  beforeAll(() => {
    // Install scripts run: a native build would show here as a compiled addon.
    ({ project, tarball: packed } = packAndInstall(CORE, 'hrw-core-consumer-'));
  }, 240_000);

  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it('installs no native build, no database driver, no OpenTelemetry SDK, no MCP or ACP SDK, and at most 25 MB', () => {
    const modules = join(project, 'node_modules');
    const installed = readdirSync(modules).flatMap((name) => (name.startsWith('@') ? readdirSync(join(modules, name)).map((n) => `${name}/${n}`) : [name]));
    expect(installed).toContain('headless-run-webhook-core');
    for (const heavy of [
      '@photostructure/sqlite',
      'pg',
      'pg-boss',
      '@opentelemetry/sdk-trace-base',
      '@opentelemetry/exporter-trace-otlp-http',
      '@modelcontextprotocol/sdk',
      '@agentclientprotocol/sdk',
      'pino',
      'pino-pretty',
    ])
      expect(installed).not.toContain(heavy);
    expect(sh('find', [modules, '-name', '*.node'], project).out.trim()).toBe('');
    const kilobytes = Number(sh('du', ['-sk', modules], project).out.split('\t')[0]);
    expect(kilobytes).toBeGreaterThan(1000);
    expect(kilobytes).toBeLessThanOrEqual(25 * 1024);
  });

  it('embeds the handler with the memory store, from ESM and CommonJS, and runs an agent', () => {
    const body = `
      const handler = m.createHeadlessHandler({
        workspaces: [{ id: 'w', path: process.cwd(), agents: ['echo'] }],
        agents: { echo: { command: process.execPath, args: ['-e', 'console.log(process.argv[1])', '{prompt}'] } },
      });
      await handler.ready;
      const res = await handler.fetch('http://localhost/api/workspaces/w/headless', { method: 'POST', headers: { host: 'localhost', 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'hello from the host', wait: true }) }, { remoteAddress: '127.0.0.1' });
      const record = await res.json();
      const output = await (await handler.fetch('http://localhost/api/headless/' + record.taskId + '/output', { headers: { host: 'localhost' } }, { remoteAddress: '127.0.0.1' })).json();
      console.log(res.status, record.status, output.stdout.trim());
      await handler.close();`;
    const expected = '200 succeeded hello from the host';
    expect(node(['--input-type=module', '-e', `const m = await import('headless-run-webhook-core'); ${body}`]).out.trim()).toBe(expected);
    expect(node(['-e', `const m = require('headless-run-webhook-core'); (async () => { ${body} })();`]).out.trim()).toBe(expected);
  });

  it('a feature whose package is left out says which one to install: MCP over HTTP is 501 not_installed', () => {
    const script = `
      const m = await import('headless-run-webhook-core');
      const handler = m.createHeadlessHandler({ workspaces: [{ id: 'w', path: process.cwd() }] });
      const res = await handler.fetch('http://localhost/mcp', { method: 'POST', headers: { host: 'localhost', 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) }, { remoteAddress: '127.0.0.1' });
      console.log(JSON.stringify({ status: res.status, problem: await res.json() }));
      await handler.close();`;
    const { status, problem } = JSON.parse(node(['--input-type=module', '-e', script]).out.trim());
    expect(status).toBe(501);
    expect(problem).toMatchObject({ code: 'not_installed', status: 501 });
    expect(problem.detail).toContain('npm install @modelcontextprotocol/sdk');
  });

  it('an agent over ACP without its SDK fails its run saying which package to install', () => {
    // A stand-in for gemini that ends when its stdin closes, as ACP agents do.
    const binDir = join(project, 'bin');
    mkdirSync(binDir, { recursive: true });
    writeFileSync(join(binDir, 'gemini'), '#!/bin/sh\ncat > /dev/null\n', { mode: 0o755 });
    const script = `
      const m = await import('headless-run-webhook-core');
      const handler = m.createHeadlessHandler({ workspaces: [{ id: 'w', path: process.cwd(), agents: ['gemini-acp'] }] });
      await handler.ready;
      const res = await handler.fetch('http://localhost/api/workspaces/w/headless', { method: 'POST', headers: { host: 'localhost', 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'hi', wait: true }) }, { remoteAddress: '127.0.0.1' });
      console.log(JSON.stringify(await res.json()));
      await handler.close();`;
    const record = JSON.parse(node(['--input-type=module', '-e', script], { PATH: `${binDir}:${process.env.PATH}`, GEMINI_API_KEY: 'not-used' }).out.trim());
    expect(record).toMatchObject({ agent: 'gemini-acp', status: 'failed', error: { code: 'agent_error' } });
    expect(record.error.message).toContain('npm install @agentclientprotocol/sdk');
  });

  it('its SQLite store runs on Node’s own node:sqlite from 22.13 on; on Node 20 it names the package to install', () => {
    const script = `
      const m = await import('headless-run-webhook-core');
      const dir = (await import('node:fs')).mkdtempSync((await import('node:os')).tmpdir() + '/hrw-lean-sqlite-');
      try {
        const keyv = await m.createSqliteKeyv(dir);
        await keyv.set('k', { v: 1 });
        console.log('stored', JSON.stringify(await keyv.get('k')));
        await keyv.disconnect();
      } catch (error) { console.log('refused', error.message); }
      (await import('node:fs')).rmSync(dir, { recursive: true, force: true });`;
    for (const [version, binary] of testNodes()) {
      const out = node(['--input-type=module', '-e', script], {}, binary).out.trim();
      if (builtInSqlite(version)) expect(out, version).toBe('stored {"v":1}');
      else
        expect(out, version).toMatch(
          /^refused The SQLite store on Node\.js 20\.\S+ \(22\.13 and later have SQLite built in\) needs the @photostructure\/sqlite package, which is not installed: npm install @photostructure\/sqlite$/,
        );
    }
  });

  it('has the version of the package it comes from, and the same versions of what both depend on', () => {
    const own = JSON.parse(readFileSync(join(CORE, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
    const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
    expect(own.version).toBe(root.version);
    for (const [name, range] of Object.entries(own.dependencies)) expect(root.dependencies[name], name).toBe(range);
  });

  it('publint and @arethetypeswrong/cli report nothing', () => {
    const lint = sh(bin('publint'), ['--strict'], CORE);
    expect(lint.out).toContain('All good!');
    const types = sh(bin('attw'), [join(project, packed)], ROOT);
    expect(types.code, types.out).toBe(0);
  }, 600_000);
});
