import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeAgent } from '../helpers/harness';
import { waitEnded as waitEnded_ } from '../helpers/wait';
import { type Target, type TargetFactory, deno, expressMounted, inProcess, killTargets, nodeHttp } from '../helpers/targets';

/**
 * One HTTP conformance suite — the contract's observable behaviour — run over the in-process
 * handler and over a real server for each adapter: node:http, Express (mounted under /agents)
 * and Deno. A loopback peer with no forwarding header is local only if the adapter passed the
 * socket's peer address to the core, so the 200s below also prove that plumbing.
 */

const targets: Array<[string, TargetFactory]> = [
  ['in-process', inProcess],
  ['node:http', nodeHttp],
  ['express under /agents', expressMounted],
  ['deno', deno],
];

afterAll(killTargets);

describe.each(targets)('conformance: %s', (_name, make) => {
  let target: Target;
  let dir: string;
  const JSON_HEADERS = { 'content-type': 'application/json' };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hrw-conf-'));
    target = await make({ workspaces: [{ id: 'ws', path: dir, agents: ['fake'] }], agents: { fake: fakeAgent }, maxConcurrentRuns: 4 });
  }, 600_000);
  afterAll(async () => {
    await target?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = (body: unknown, headers: Record<string, string> = {}) =>
    target.send('POST', '/api/workspaces/ws/headless', { headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify(body) });

  const waitEnded = (taskId: string) => waitEnded_(async () => (await target.send('GET', `/api/headless/${taskId}`)).json());

  it('async start: 202 with Location, then a readable record that ends succeeded', async () => {
    const res = await start({ prompt: 'echo hi' });
    expect(res.status).toBe(202);
    const { taskId, resumeId, status } = res.json();
    expect(status).toBe('running');
    // Location names the record where this host serves it, mount path included.
    const mountPath = new URL(target.base).pathname.replace(/\/$/, '');
    expect(res.headers.location).toBe(`${mountPath}/api/headless/${taskId}`);
    expect(new URL(res.headers.location!, target.base).href).toBe(`${target.base}/api/headless/${taskId}`);
    expect(await waitEnded(taskId)).toMatchObject({ taskId, resumeId, workspaceId: 'ws', agent: 'fake', status: 'succeeded', exitCode: 0 });
  });

  it('the event stream of a run, live to its end', async () => {
    const { taskId } = (await start({ prompt: 'session conf-1; sleep 200; echo x' })).json();
    const res = await target.send('GET', `/api/headless/${taskId}/events`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect([...res.text.matchAll(/^event: (.+)$/gm)].map((m) => m[1])).toEqual(['run.started', 'agent.session', 'run.ended']);
  });

  it('sync start: 200 with the output; HEADLESS_API_URL is the base URL, mount path included', async () => {
    const res = await start({ prompt: 'dump-env', wait: true });
    expect(res.status).toBe(200);
    const body = res.json();
    expect(body.status).toBe('succeeded');
    const env = JSON.parse(body.output.stdout);
    expect(env.HEADLESS_API_URL).toBe(target.base);
    expect(env.HEADLESS_WORKSPACE_ID).toBe('ws');
  });

  it('list and cancel', async () => {
    const { taskId } = (await start({ prompt: 'sleep 20000' })).json();
    const list = (await target.send('GET', '/api/headless?wsId=ws&status=running')).json();
    expect(list.runs.map((r: { taskId: string }) => r.taskId)).toEqual([taskId]);
    expect((await target.send('POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    expect(await waitEnded(taskId)).toMatchObject({ status: 'cancelled' });
  });

  it('Sessions and the Inbox', async () => {
    const first = (await start({ prompt: 'session conf-1', wait: true })).json();
    const session = (await target.send('GET', `/api/sessions/${first.resumeId}`)).json();
    expect(session).toMatchObject({ resumeId: first.resumeId, status: 'idle', resumable: true });
    const pushed = await target.send('POST', '/api/workspaces/ws/inbox', { headers: JSON_HEADERS, body: JSON.stringify({ title: 't', body: 'b' }) });
    expect(pushed.status).toBe(201);
    const inbox = (await target.send('GET', '/api/workspaces/ws/inbox')).json();
    expect(inbox.items[0]).toMatchObject({ title: 't', body: 'b' });
  });

  it('problem JSON for the contract errors', async () => {
    const cases: Array<[Promise<import('../helpers/targets').Reply>, number, string]> = [
      [target.send('GET', '/api/nope'), 404, 'not_found'],
      [target.send('GET', '/api/headless/run_nope'), 404, 'run_not_found'],
      [target.send('DELETE', '/api/headless'), 405, 'method_not_allowed'],
      [
        target.send('POST', '/api/workspaces/ws/headless', { headers: { 'content-type': 'text/plain' }, body: '{"prompt":"x"}' }),
        415,
        'unsupported_media_type',
      ],
      [start({ prompt: 'x', cwd: '/' }), 400, 'invalid_body'],
      [start({ prompt: '' }), 400, 'prompt_required'],
      [start({ prompt: 'x', agent: 'nope' }), 400, 'agent_unknown'],
      [target.send('POST', '/api/workspaces/nope/headless', { headers: JSON_HEADERS, body: '{"prompt":"x"}' }), 404, 'workspace_not_found'],
      [target.send('GET', '/api/headless?wsId=ws', { headers: { host: 'evil.example' } }), 403, 'forbidden'],
      [target.send('GET', '/api/headless?wsId=ws', { headers: { origin: 'null' } }), 403, 'forbidden'],
      [target.send('GET', '/api/headless?wsId=ws', { headers: { 'x-forwarded-for': '198.51.100.7' } }), 401, 'unauthorized'],
    ];
    for (const [pending, status, code] of cases) {
      const res = await pending;
      expect(res.status, res.text).toBe(status);
      expect(res.headers['content-type']).toBe('application/problem+json');
      expect(res.json().code).toBe(code);
    }
    const denied = await target.send('DELETE', '/api/headless');
    expect(denied.headers.allow).toBe('GET, HEAD');
  });

  it('a body over 256 KiB is 413 body_too_large', async () => {
    const res = await start({ prompt: 'x'.repeat(300 * 1024) }).catch((error: Error) => error);
    // A server may close the connection after answering early; when the answer arrived, it is a 413.
    if (res instanceof Error) expect(res.message).toMatch(/EPIPE|ECONNRESET|socket hang up/);
    else expect(res.json()).toMatchObject({ status: 413, code: 'body_too_large' });
  });
});
