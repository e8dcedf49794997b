import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as v from 'valibot';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ConfigSchema } from '../../src/cli/config';
import { CLI } from '../helpers/daemon';

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

  it('kubernetes/fleet.yaml: API daemons and a worker Deployment per label on one PostgreSQL, its secrets as Secrets', () => {
    const docs = parseAllDocuments(readFileSync(resolve(ROOT, 'examples/kubernetes/fleet.yaml'), 'utf8')).map((d) => d.toJS() as Record<string, any>);
    const named = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name);
    // Each config parses as the daemon reads its config file.
    for (const name of ['headless-api', 'headless-worker']) {
      const config = JSON.parse(named('ConfigMap', name)?.data['headless.config.json']);
      expect(v.safeParse(ConfigSchema, config).issues, name).toBeUndefined();
    }
    const deployments = docs.filter((d) => d.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name)).toEqual(['headless-api', 'headless-worker-linux', 'headless-worker-gpu']);
    for (const deployment of deployments) {
      const [container] = deployment.spec.template.spec.containers;
      // The command line each runs is one the CLI takes (--help answers only once every flag parsed).
      const [program, ...args] = container.args as string[];
      expect(program).toBe('headless-run-webhook');
      const parsed = spawnSync(process.execPath, [CLI, ...args, '--help'], { encoding: 'utf8' });
      expect(parsed.status, `${deployment.metadata.name}: ${parsed.stderr}`).toBe(0);
      // The database URL only ever from the Secret, never written here.
      expect(container.env).toEqual([{ name: 'HEADLESS_STORE_URL', valueFrom: { secretKeyRef: { name: 'headless-run-webhook', key: 'store-url' } } }]);
    }
    const workerLabels = deployments
      .slice(1)
      .map((d) => d.spec.template.spec.containers[0].args[d.spec.template.spec.containers[0].args.indexOf('--labels') + 1]);
    expect(workerLabels).toEqual(['linux', 'gpu,linux']);
    // The API's admin token is a file from the Secret; workers have none (they answer on loopback only).
    expect(named('Deployment', 'headless-api')?.spec.template.spec.volumes.find((vol: any) => vol.name === 'token').secret.secretName).toBe(
      'headless-run-webhook',
    );
    expect(JSON.stringify(docs)).not.toMatch(/postgres:\/\/[^'"]*@/);
  });
});
