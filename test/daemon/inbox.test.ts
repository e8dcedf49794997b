import { spawnSync } from 'node:child_process';
import { type IncomingMessage, type ServerResponse, createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createNodeServer } from '../../src/adapters/node';
import { InboxPushError, pushToInbox } from '../../src/cli/inbox-client';
import { api, cleanupDaemons, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';

afterEach(closeAllHosts);
const dirs: string[] = [];
afterEach(() => cleanupDaemons(dirs));

const INBOX = '/api/workspaces/ws/inbox';

/** Starts a fake run that prints its environment and then waits; returns its run token. */
async function runningToken(host: Awaited<ReturnType<typeof createTestHost>>, workspace = 'ws') {
  const res = await host.request('POST', `/api/workspaces/${workspace}/headless`, { json: { prompt: 'dump-env; sleep 1500', agent: 'fake' } });
  const { taskId, resumeId } = (await res.json()) as { taskId: string; resumeId: string };
  // The run token only exists in the run's environment: read it from the process.
  const { findMarkedProcesses } = await import('../../src/core/process/process-tree');
  const { readFileSync } = await import('node:fs');
  for (let i = 0; i < 100; i++) {
    const [pid] = findMarkedProcesses(new Set([taskId])).keys();
    if (pid !== undefined) {
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const token = env.find((e) => e.startsWith('HEADLESS_RUN_TOKEN='))!.slice('HEADLESS_RUN_TOKEN='.length);
      return { taskId, resumeId, token };
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('run process not found');
}

describe('the Inbox API', () => {
  it('push, list newest first with the unread filter and a cursor, mark read', async () => {
    const host = await createTestHost();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await host.request('POST', INBOX, { json: { title: `t${i}`, body: `b${i}` } });
      expect(res.status).toBe(201);
      const item = (await res.json()) as Record<string, unknown>;
      expect(Object.keys(item).sort()).toEqual(['body', 'createdAt', 'id', 'readAt', 'resumeId', 'taskId', 'title', 'workspaceId']);
      expect(item).toMatchObject({ workspaceId: 'ws', taskId: null, resumeId: null, title: `t${i}`, readAt: null });
      ids.push(item.id as string);
    }
    const one = await host.request('GET', `${INBOX}/${ids[1]}`);
    expect([one.status, await one.json()]).toEqual([200, expect.objectContaining({ id: ids[1], title: 't1', body: 'b1', readAt: null })]);
    const read = await host.request('POST', `${INBOX}/${ids[1]}/read`);
    expect(read.status).toBe(200);
    const readItem = (await read.json()) as { readAt: string };
    expect(Date.parse(readItem.readAt)).not.toBeNaN();
    const again = (await (await host.request('POST', `${INBOX}/${ids[1]}/read`)).json()) as { readAt: string };
    expect(again.readAt).toBe(readItem.readAt);

    const page1 = (await (await host.request('GET', `${INBOX}?limit=2`)).json()) as { items: Array<{ id: string }>; nextCursor: string };
    expect(page1.items.map((i) => i.id)).toEqual([ids[4], ids[3]]);
    const page2 = (await (await host.request('GET', `${INBOX}?limit=2&cursor=${page1.nextCursor}`)).json()) as {
      items: Array<{ id: string }>;
      nextCursor: string;
    };
    expect(page2.items.map((i) => i.id)).toEqual([ids[2], ids[1]]);
    const unread = (await (await host.request('GET', `${INBOX}?unread=true`)).json()) as { items: Array<{ id: string }>; nextCursor: null };
    expect(unread.items.map((i) => i.id)).toEqual([ids[4], ids[3], ids[2], ids[0]]);
    expect(unread.nextCursor).toBeNull();
    expect(((await (await host.request('GET', '/api/workspaces/other/inbox')).json()) as { items: unknown[] }).items).toEqual([]);
  });

  it('bad inputs', async () => {
    const host = await createTestHost();
    const cases: Array<[string, string, unknown, number, string]> = [
      ['POST', INBOX, {}, 400, 'invalid_body'],
      ['POST', INBOX, { title: '' }, 400, 'invalid_body'],
      ['POST', INBOX, { title: '   ' }, 400, 'invalid_body'],
      ['POST', INBOX, { title: 't'.repeat(201) }, 400, 'invalid_body'],
      ['POST', INBOX, { title: 't', body: 'b'.repeat(64_001) }, 400, 'invalid_body'],
      ['POST', INBOX, { title: 't', body: 5 }, 400, 'invalid_body'],
      ['POST', INBOX, { title: 't', taskId: 'run_forged' }, 400, 'invalid_body'],
      ['POST', INBOX, { title: 't', resumeId: 'ses_forged' }, 400, 'invalid_body'],
      ['POST', '/api/workspaces/nope/inbox', { title: 't' }, 404, 'workspace_not_found'],
      ['GET', '/api/workspaces/nope/inbox', undefined, 404, 'workspace_not_found'],
      ['GET', `${INBOX}?unread=yes`, undefined, 400, 'invalid_body'],
      ['GET', `${INBOX}?limit=0`, undefined, 400, 'invalid_body'],
      ['POST', `${INBOX}/inb_nope/read`, undefined, 404, 'inbox_item_not_found'],
      ['GET', `${INBOX}/inb_nope`, undefined, 404, 'inbox_item_not_found'],
      ['GET', '/api/workspaces/nope/inbox/inb_nope', undefined, 404, 'workspace_not_found'],
      ['DELETE', INBOX, undefined, 405, 'method_not_allowed'],
    ];
    for (const [method, path, json, status, code] of cases) {
      expect(await problem(await host.request(method, path, json === undefined ? {} : { json })), `${method} ${path} ${JSON.stringify(json)}`).toMatchObject({
        status,
        code,
      });
    }
    const item = (await (await host.request('POST', INBOX, { json: { title: 't' } })).json()) as { id: string; body: string };
    expect(item.body).toBe('');
    expect(await problem(await host.request('POST', `/api/workspaces/other/inbox/${item.id}/read`))).toMatchObject({
      status: 404,
      code: 'inbox_item_not_found',
    });
    expect(await problem(await host.request('GET', `/api/workspaces/other/inbox/${item.id}`))).toMatchObject({ status: 404, code: 'inbox_item_not_found' });
    expect((await host.request('POST', INBOX, { json: { title: 't'.repeat(200), body: 'b'.repeat(64_000) } })).status).toBe(201);
  });

  it('a run token pushes to its own workspace only while its run is running, attributed to the run', async () => {
    const host = await createTestHost();
    const { taskId, resumeId, token } = await runningToken(host);
    const bearer = { authorization: `Bearer ${token}` };
    // A remote peer with the run token is accepted for its push (the agent may reach a public URL).
    const pushed = await host.request('POST', INBOX, { json: { title: 'report', body: 'all good' }, headers: bearer, remote: '203.0.113.5' });
    expect(pushed.status).toBe(201);
    expect(await pushed.json()).toMatchObject({ taskId, resumeId, workspaceId: 'ws', title: 'report' });
    // Its workspace only, and the push route only.
    expect(await problem(await host.request('POST', '/api/workspaces/other/inbox', { json: { title: 'x' }, headers: bearer }))).toMatchObject({
      status: 401,
      code: 'unauthorized',
    });
    expect((await host.request('GET', INBOX, { headers: bearer })).status).toBe(401);
    expect((await host.request('GET', `/api/headless/${taskId}`, { headers: bearer })).status).toBe(401);
    expect((await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'fake' }, headers: bearer })).status).toBe(401);
    // Never shown by any endpoint.
    const shown = [
      await (await host.request('GET', `/api/headless/${taskId}`)).text(),
      await (await host.request('GET', `/api/sessions/${resumeId}`)).text(),
      await (await host.request('GET', INBOX)).text(),
    ];
    for (const text of shown) expect(text).not.toContain(token);
    await host.waitEnded(taskId);
    expect(await problem(await host.request('POST', INBOX, { json: { title: 'late' }, headers: bearer }))).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('a local push cannot claim a run: taskId and resumeId stay null without a run token', async () => {
    const host = await createTestHost();
    const item = (await (await host.request('POST', INBOX, { json: { title: 'x' } })).json()) as { taskId: null; resumeId: null };
    expect(item).toMatchObject({ taskId: null, resumeId: null });
  });

  it('a custom authorize hook still lets a run push to its own Inbox with its token', async () => {
    // This hook refuses every bearer token: only the core's own run-token rule can admit the push.
    const host = await createTestHost({ authorize: (request) => request.headers.get('authorization') === null });
    const { taskId, token } = await runningToken(host);
    const res = await host.request('POST', INBOX, { json: { title: 'ok' }, headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(201);
    expect((await host.request('GET', INBOX, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    await host.waitEnded(taskId);
  });
});

describe('headless-inbox through the real daemon', () => {
  it('an agent pushes its report with headless-inbox; the caller reads it; the token dies with the run', async () => {
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd, {
      workspaces: [
        { id: 'ws', path: '.', agents: ['fake'] },
        { id: 'ws2', path: '.', agents: ['fake'] },
      ],
    });
    const daemon = await startDaemon(cwd);
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'push Nightly check; dump-env', wait: true });
    const run = (await res.json()) as { taskId: string; resumeId: string; status: string; output: { stdout: string } };
    expect(run.status).toBe('succeeded');
    expect(run.output.stdout).toMatch(/^push-exit 0 pushed inb_/m);
    const inbox = (await (await api(daemon, 'GET', '/api/workspaces/ws/inbox?unread=true')).json()) as { items: Array<Record<string, unknown>> };
    expect(inbox.items).toHaveLength(1);
    expect(inbox.items[0]).toMatchObject({ title: 'Nightly check', body: `report from ${run.taskId}`, taskId: run.taskId, resumeId: run.resumeId });

    const env = JSON.parse(run.output.stdout.split('\n')[1]!) as Record<string, string>;
    const cli = resolve(__dirname, '../../dist/inbox-cli.js');
    const late = spawnSync(process.execPath, [cli, 'push', '--title', 'too late'], { input: 'x', encoding: 'utf8', env: { ...process.env, ...pick(env) } });
    expect(late.status).not.toBe(0);
    expect(late.stderr).toContain('push refused (HTTP 401)');
    const other = spawnSync(process.execPath, [cli, 'push', '--title', 'x'], {
      input: 'x',
      encoding: 'utf8',
      env: { ...process.env, ...pick(env), HEADLESS_WORKSPACE_ID: 'ws2' },
    });
    expect(other.status).not.toBe(0);
    await daemon.stop();
  });

  it('runs find headless-inbox on their PATH however the service was started', async () => {
    const cwd = tempDir();
    dirs.push(cwd);
    writeConfig(cwd);
    const push = async (url: string) => {
      const res = await fetch(`${url}/api/workspaces/ws/headless`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'push from a run', agent: 'fake', wait: true }),
      });
      return ((await res.json()) as { output: { stdout: string } }).output.stdout;
    };
    // As a service manager starts it: an absolute path to node and the command, a bare PATH
    // without node, npm or this package's bin folder on it.
    const daemon = await startDaemon(cwd, ['--port', '0'], { PATH: '/usr/bin:/bin' });
    expect(await push(daemon.url)).toMatch(/^push-exit 0 pushed inb_/m);
    await daemon.stop();
    // Embedded in a host app on its own server.
    const host = await createTestHost();
    const server = createNodeServer(host.handler);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      expect(await push(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)).toMatch(/^push-exit 0 pushed inb_/m);
    } finally {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  });

  it('fails clearly without the variables, and when the service is down', () => {
    const cli = resolve(__dirname, '../../dist/inbox-cli.js');
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('HEADLESS_')));
    const none = spawnSync(process.execPath, [cli, 'push', '--title', 't'], { input: 'x', encoding: 'utf8', env: clean });
    expect(none.status).not.toBe(0);
    expect(none.stderr).toContain('HEADLESS_API_URL');
    const down = spawnSync(process.execPath, [cli, 'push', '--title', 't'], {
      input: 'x',
      encoding: 'utf8',
      env: { ...clean, HEADLESS_API_URL: 'http://127.0.0.1:9', HEADLESS_WORKSPACE_ID: 'ws', HEADLESS_RUN_TOKEN: 't' },
    });
    expect(down.status).not.toBe(0);
    expect(down.stderr).toContain('cannot reach the headless service');
    const noTitle = spawnSync(process.execPath, [cli, 'push'], { input: 'x', encoding: 'utf8', env: clean });
    expect(noTitle.status).not.toBe(0);
    expect(noTitle.stderr).toContain('--title');
  });

  it('answers --help and --version; an unknown command is a usage error', () => {
    const cli = resolve(__dirname, '../../dist/inbox-cli.js');
    const run = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
    for (const help of [run('--help'), run('-h'), run()]) {
      expect(help.status).toBe(0);
      expect(help.stdout).toContain('Usage: headless-inbox push --title TITLE');
    }
    const version = run('--version');
    expect([version.status, version.stdout.trim()]).toEqual([0, (require('../../package.json') as { version: string }).version]);
    const unknown = run('pull');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('unknown command "pull"');
  });
});

function pick(env: Record<string, string>) {
  return { HEADLESS_API_URL: env.HEADLESS_API_URL!, HEADLESS_WORKSPACE_ID: env.HEADLESS_WORKSPACE_ID!, HEADLESS_RUN_TOKEN: env.HEADLESS_RUN_TOKEN! };
}

describe('the headless-inbox client, against a loopback server', () => {
  // What the server answers next, and the requests it saw.
  let answer: (req: IncomingMessage, body: string, res: ServerResponse) => void = (_req, _body, res) => res.end();
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => answer(req, body, res));
  });
  let env: Record<string, string>;
  beforeAll(async () => {
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    env = { HEADLESS_API_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/base/`, HEADLESS_WORKSPACE_ID: 'ws 1', HEADLESS_RUN_TOKEN: 'tok' };
  });
  afterAll(() => new Promise((done) => server.close(done)));
  const reply =
    (status: number, text: string, type = 'application/json') =>
    (_req: IncomingMessage, _body: string, res: ServerResponse) =>
      res.writeHead(status, { 'content-type': type }).end(text);

  it('posts the title and body with the run token to the workspace Inbox', async () => {
    let seen: { auth: string | undefined; body: unknown; url: string | undefined; method: string | undefined } | undefined;
    answer = (req, body, res) => {
      seen = { auth: req.headers.authorization, body: JSON.parse(body), url: req.url, method: req.method };
      reply(201, JSON.stringify({ id: 'inb_1' }))(req, body, res);
    };
    expect(await pushToInbox({ title: 'T', body: 'B', env })).toEqual({ id: 'inb_1' });
    expect(seen).toEqual({ auth: 'Bearer tok', body: { title: 'T', body: 'B' }, url: '/base/api/workspaces/ws%201/inbox', method: 'POST' });
  });

  it('turns a problem answer into a clear error', async () => {
    answer = reply(400, JSON.stringify({ status: 400, code: 'invalid_body', detail: 'Field "title" is invalid' }), 'application/problem+json');
    await expect(pushToInbox({ title: 'T', body: 'B', env })).rejects.toThrow(/push refused \(HTTP 400\) invalid_body: Field "title" is invalid/);
  });

  it('reports a non-JSON failure and a network error', async () => {
    answer = reply(502, 'bad gateway', 'text/plain');
    await expect(pushToInbox({ title: 'T', body: 'B', env })).rejects.toThrow(/HTTP 502\) bad gateway/);
    answer = (req) => req.socket.destroy();
    const hungUp = pushToInbox({ title: 'T', body: 'B', env });
    await expect(hungUp).rejects.toBeInstanceOf(InboxPushError);
    await expect(hungUp).rejects.toThrow(/cannot reach the headless service/);
  });
});
