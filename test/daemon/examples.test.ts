import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

/** Each example starts with the one command written at its top, and answers the API. */

const ROOT = resolve(__dirname, '../..');
const children: ChildProcess[] = [];
/** What each started example printed, on both streams. */
const printed = new Map<string, () => string>();
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function run(command: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    const timer = setTimeout(() => fail(new Error(`no listening line:\n${out}`)), 60_000);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const match = /listening on (http:\/\/\S+)\n/.exec(out);
      if (match) {
        clearTimeout(timer);
        done(match[1]!);
      }
    });
    child.once('exit', (code) => fail(new Error(`exited ${code}:\n${out}`)));
    printed.set(args.join(' '), () => out);
  });
}

describe('examples', () => {
  it('node-daemon.mjs: node examples/node-daemon.mjs', async () => {
    const base = await run(process.execPath, ['examples/node-daemon.mjs']);
    expect((await fetch(`${base}/api/headless?wsId=default`)).status).toBe(200);
  });

  it('express-gateway.mjs: GATEWAY_API_KEY=… node examples/express-gateway.mjs', async () => {
    const base = await run(process.execPath, ['examples/express-gateway.mjs'], { GATEWAY_API_KEY: 'k-123' });
    expect(base).toMatch(/\/agents$/);
    expect((await fetch(`${base}/api/headless?wsId=default`, { headers: { 'x-api-key': 'k-123' } })).status).toBe(200);
    expect((await fetch(`${base}/api/headless?wsId=default`, { headers: { 'x-api-key': 'wrong' } })).status).toBe(401);
    expect((await fetch(`${base}/api/headless?wsId=default`)).status).toBe(401);
  });

  it('deno-server.ts: deno run -A examples/deno-server.ts', async () => {
    const base = await run(resolve(ROOT, 'node_modules/.bin/deno'), ['run', '-A', 'examples/deno-server.ts'], { NO_COLOR: '1' });
    expect((await fetch(`${base}/api/headless?wsId=default`)).status).toBe(200);
    const pushed = await fetch(`${base}/api/workspaces/default/inbox`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"title":"a body read under Deno"}',
    });
    expect(pushed.status).toBe(201);
    // Deno announces its legacy request.signal at the first request that reads it: the adapter reads none.
    expect(printed.get('run -A examples/deno-server.ts')?.()).not.toContain('legacy behavior');
  });
});
