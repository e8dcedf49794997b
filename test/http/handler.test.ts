import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { waitFor } from '../helpers/wait';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestHost, closeAllHosts, createTestHost, problem } from '../helpers/harness';

afterEach(closeAllHosts);

describe('start a run', () => {
  it('async: 202 with taskId, resumeId, status running and a Location', async () => {
    const host = await createTestHost();
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo hi', agent: 'fake' } });
    expect(res.status).toBe(202);
    const body = (await res.json()) as Record<string, string>;
    expect(Object.keys(body).sort()).toEqual(['resumeId', 'status', 'taskId']);
    expect(body.status).toBe('running');
    expect(res.headers.get('location')).toBe(`/api/headless/${body.taskId}`);
    const record = await host.waitEnded(body.taskId!);
    expect(record).toMatchObject({ status: 'succeeded', exitCode: 0, signal: null, mode: 'async', agent: 'fake', workspaceId: 'ws' });
    expect(record.error).toBeUndefined();
  });

  it('sync: 200 with the final record and the output tails', async () => {
    const host = await createTestHost();
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo out; exit 3', agent: 'fake', wait: true } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'failed', exitCode: 3, mode: 'sync', error: { code: 'exit_code' } });
    expect(body.output).toEqual({ stdout: 'out\n', stderr: '', truncated: false });
    expect(typeof body.durationMs).toBe('number');
    expect(body.endedAt).not.toBeNull();
  });

  it('sync output keeps only the last 64 KiB of each stream, marked truncated', async () => {
    const host = await createTestHost();
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'print 100000', agent: 'fake', wait: true } });
    const body = (await res.json()) as { output: { stdout: string; truncated: boolean } };
    expect(body.output.stdout.length).toBe(64 * 1024);
    expect(body.output.truncated).toBe(true);
  });

  it('sync timeout answers 200 with timed_out', async () => {
    const host = await createTestHost();
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'sleep 10000', agent: 'fake', wait: true, timeoutMs: 300 } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'timed_out', timeoutMs: 300, signal: 'SIGTERM', error: { code: 'timed_out' } });
  });

  it('clamps timeoutMs above the cap and shows the effective value', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('sleep 5000', { timeoutMs: 99_999_999 });
    const record = (await (await host.request('GET', `/api/headless/${taskId}`)).json()) as { timeoutMs: number };
    expect(record.timeoutMs).toBe(1_800_000);
    await host.request('POST', `/api/headless/${taskId}/cancel`);
  });

  it('defaults timeoutMs to 5 minutes', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo x');
    expect(((await host.waitEnded(taskId)) as { timeoutMs: number }).timeoutMs).toBe(300_000);
  });

  it('a caller that disconnects from a sync run leaves the run going and readable', async () => {
    const host = await createTestHost();
    const abort = new AbortController();
    const pending = Promise.resolve(
      host.handler.fetch(
        'http://localhost:47331/api/workspaces/ws/headless',
        {
          method: 'POST',
          headers: { host: 'localhost', 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'sleep 300; echo done', agent: 'fake', wait: true }),
          signal: abort.signal,
        },
        { remoteAddress: '127.0.0.1' },
      ),
    ).catch(() => undefined);
    // Disconnects once the run is there (however long that takes), while it still runs.
    const listed = async () => ((await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string }> }).runs;
    await waitFor(async () => (await listed()).length === 1, { what: 'the run to be accepted' });
    abort.abort();
    await pending;
    const list = { runs: await listed() };
    expect(list.runs).toHaveLength(1);
    expect(await host.waitEnded(list.runs[0]!.taskId)).toMatchObject({ status: 'succeeded' });
  });
});

describe('read, list, cancel', () => {
  it('reads a record with exactly the contract fields, never the prompt', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo secret-prompt-text');
    const record = await host.waitEnded(taskId);
    expect(Object.keys(record).sort()).toEqual(
      [
        'agent',
        'agentChosenBy',
        'createdAt',
        'durationMs',
        'endedAt',
        'exitCode',
        'mode',
        'resumeId',
        'signal',
        'source',
        'spec',
        'status',
        'taskId',
        'timeoutMs',
        'workspaceId',
      ].sort(),
    );
    expect(record.source).toEqual({ kind: 'api' });
    expect(record.spec).toEqual({ agent: 'fake', timeoutMs: 300_000, permissions: 'full', sandbox: false, isolation: 'none' });
    expect(JSON.stringify(record)).not.toContain('secret-prompt-text');
    expect(Date.parse(record.createdAt as string)).not.toBeNaN();
  });

  it('unknown run is 404 run_not_found', async () => {
    const host = await createTestHost();
    expect(await problem(await host.request('GET', '/api/headless/run_nope'))).toMatchObject({ status: 404, code: 'run_not_found' });
  });

  it('lists newest first, filters by status, and pages with a cursor without gaps or repeats', async () => {
    const host = await createTestHost();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push((await host.start('echo x')).taskId);
      await host.waitEnded(ids[i]!);
    }
    const running = await host.start('sleep 5000');
    const seen: string[] = [];
    let late = '';
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const q: string = `/api/headless?wsId=ws&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
      const body = (await (await host.request('GET', q)).json()) as { runs: Array<{ taskId: string }>; nextCursor: string | null };
      seen.push(...body.runs.map((r) => r.taskId));
      cursor = body.nextCursor;
      if (!cursor) break;
      // A run created mid-walk must not disturb the pages already promised.
      if (page === 0) late = (await host.start('echo late')).taskId;
    }
    expect(seen).toEqual([running.taskId, ...ids.reverse()]);
    await host.waitEnded(late);
    const onlyRunning = (await (await host.request('GET', '/api/headless?wsId=ws&status=running')).json()) as { runs: Array<{ taskId: string }> };
    expect(onlyRunning.runs.map((r) => r.taskId)).toEqual([running.taskId]);
    const other = (await (await host.request('GET', '/api/headless?wsId=other')).json()) as { runs: unknown[] };
    expect(other.runs).toEqual([]);
    await host.request('POST', `/api/headless/${running.taskId}/cancel`);
  });

  it('list errors: missing wsId, bad status/limit/cursor, unknown workspace', async () => {
    const host = await createTestHost();
    for (const q of [
      '',
      '?status=running',
      '?wsId=ws&status=bogus',
      '?wsId=ws&limit=0',
      '?wsId=ws&limit=501',
      '?wsId=ws&limit=1e3',
      '?wsId=ws&limit=-1',
      '?wsId=ws&cursor=..%2Fx',
      // Id-shaped, but no run id: a cursor is only ever a page's nextCursor.
      '?wsId=ws&cursor=abc',
      '?wsId=ws&cursor=inb_0mwr8dzfl0000daebd112c3694904',
      '?wsId=ws&limit=999',
      '?wsId=ws&extra=1',
      '?wsId=ws&wsId=other',
    ]) {
      expect(await problem(await host.request('GET', `/api/headless${q}`)), q).toMatchObject({ status: 400, code: 'invalid_body' });
    }
    expect(await problem(await host.request('GET', '/api/headless?wsId=nope'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
    // A run id the list no longer holds (pruned since) still pages on from where it was.
    expect((await host.request('GET', '/api/headless?wsId=ws&cursor=run_0mwr8dzfl0000daebd112c3694904&limit=500')).status).toBe(200);
  });

  it('cancel: 202 with the record, then cancelled; 409 once ended; 404 unknown', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('sleep 20000');
    const res = await host.request('POST', `/api/headless/${taskId}/cancel`);
    expect(res.status).toBe(202);
    expect(((await res.json()) as { taskId: string }).taskId).toBe(taskId);
    expect(await host.waitEnded(taskId)).toMatchObject({ status: 'cancelled', signal: 'SIGTERM' });
    expect(await problem(await host.request('POST', `/api/headless/${taskId}/cancel`))).toMatchObject({ status: 409, code: 'run_not_running' });
    expect(await problem(await host.request('POST', '/api/headless/run_nope/cancel'))).toMatchObject({ status: 404, code: 'run_not_found' });
  });

  it('a terminal record never changes again', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo x');
    await host.waitEnded(taskId);
    const a = await (await host.request('GET', `/api/headless/${taskId}`)).text();
    await host.request('POST', `/api/headless/${taskId}/cancel`);
    const b = await (await host.request('GET', `/api/headless/${taskId}`)).text();
    expect(b).toBe(a);
  });

  it('cancel and the watchdog racing: the first to act decides', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('ignore-term; sleep 20000', { timeoutMs: 200 });
    // The watchdog has acted: the agent says it got SIGTERM, or (started too slowly to ignore it) it has ended.
    const acted = async () => {
      const out = (await (await host.request('GET', `/api/headless/${taskId}/output`)).json()) as { status: string; stdout: string };
      return out.status !== 'running' || out.stdout.includes('got TERM');
    };
    await waitFor(acted, { timeoutMs: 240_000, what: 'the watchdog to act' });
    expect(await problem(await host.request('POST', `/api/headless/${taskId}/cancel`))).toMatchObject({ status: 409, code: 'run_not_running' });
    // SIGKILL after the grace when the agent ignored SIGTERM; SIGTERM when it had not yet set itself to ignore it.
    expect(await host.waitEnded(taskId, 240_000)).toMatchObject({ status: 'timed_out', signal: expect.stringMatching(/^SIG(KILL|TERM)$/) });
  });
});

describe('routes and errors', () => {
  it('every error is problem JSON with type, title, status, detail, code', async () => {
    const host = await createTestHost();
    const res = await host.request('GET', '/nope');
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['code', 'detail', 'status', 'title', 'type']);
    expect(body).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('wrong method is 405 with Allow', async () => {
    const host = await createTestHost();
    for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      const res = await host.request(method, '/api/headless');
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    }
    const res = await host.request('GET', '/api/workspaces/ws/headless');
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('a 500 never leaks the error message or a stack', async () => {
    const host = await createTestHost({
      spawner: async () => {
        throw new Error('secret internal detail at /home/x');
      },
    });
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'fake' } });
    const text = await res.text();
    expect(res.status).toBe(500);
    expect(text).not.toContain('secret internal detail');
    expect(text).not.toMatch(/\bat \//);
  });
});

describe('options', () => {
  it('rejects invalid workspace lists at creation', async () => {
    const { createHeadlessHandler } = await import('../../src/core/index');
    expect(() => createHeadlessHandler({ workspaces: [{ id: '../x', path: '/tmp' }] })).toThrow(/must match/);
    expect(() =>
      createHeadlessHandler({
        workspaces: [
          { id: 'a', path: '/tmp' },
          { id: 'a', path: '/tmp' },
        ],
      }),
    ).toThrow(/listed twice/);
    expect(() => createHeadlessHandler({ workspaces: [{ id: 'a', path: 'relative/dir' }] })).toThrow(/absolute path/);
  });

  it('a workspace resolver is called only with valid ids', async () => {
    const asked: string[] = [];
    const host = await createTestHost({
      workspaces: async (id) => {
        asked.push(id);
        return id === 'dyn' ? { id, path: '/tmp', agents: ['fake'] } : undefined;
      },
    });
    expect((await host.request('GET', '/api/headless?wsId=dyn')).status).toBe(200);
    expect(await problem(await host.request('GET', '/api/headless?wsId=nope'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
    expect(await problem(await host.request('POST', '/api/workspaces/..%2Fetc/headless', { json: { prompt: 'x' } }))).toMatchObject({
      code: 'workspace_not_found',
    });
    expect(asked).toEqual(['dyn', 'nope']);
  });
});

describe('basePath', () => {
  it('serves the API under the prefix only, and gives runs the prefixed URL', async () => {
    const host = await createTestHost({ basePath: '/agents/' });
    expect((await host.request('GET', '/agents/api/headless?wsId=ws')).status).toBe(200);
    expect(await problem(await host.request('GET', '/api/headless?wsId=ws'))).toMatchObject({ status: 404, code: 'not_found' });
    expect((await host.request('GET', '/agentsx/api/headless?wsId=ws')).status).toBe(404);
    const res = await host.request('POST', '/agents/api/workspaces/ws/headless', { json: { prompt: 'dump-env', agent: 'fake', wait: true } });
    const body = (await res.json()) as { output: { stdout: string } };
    expect(JSON.parse(body.output.stdout).HEADLESS_API_URL).toBe('http://localhost:47331/agents');
  });
});

describe('MCP behind a custom gate', () => {
  it('tool calls carry the request\u2019s headers, so a gate that reads its own header decides them as direct calls', async () => {
    const host = await createTestHost({ authorize: (request) => request.headers.get('x-api-key') === 'k' });
    const call = (key: string) =>
      host.request('POST', '/mcp', {
        json: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_run', arguments: { taskId: 'run_nope' } } },
        headers: { accept: 'application/json, text/event-stream', 'x-api-key': key },
      });
    const answered = (await (await call('k')).json()) as { result: { content: Array<{ text: string }> } };
    expect(answered.result.content[0]!.text).toMatch(/^run_not_found: /);
    expect((await call('wrong')).status).toBe(401);
  });
});

describe("the service's secrets", () => {
  it('never reach a run, even from a library user’s own environment', async () => {
    const env = {
      ...process.env,
      HEADLESS_ADMIN_TOKEN: 'admin-secret',
      HEADLESS_WEBHOOK_SECRET: 'whsec_x',
      HEADLESS_STORE_URL: 'postgres://u:pw@h/db',
      CREDENTIALS_DIRECTORY: '/run/credentials/headless.service',
      KEPT: 'yes',
    };
    const host = await createTestHost({ env });
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'dump-env', agent: 'fake', wait: true } });
    const seen = JSON.parse(((await res.json()) as { output: { stdout: string } }).output.stdout) as Record<string, string>;
    expect(seen.KEPT).toBe('yes');
    for (const name of ['HEADLESS_ADMIN_TOKEN', 'HEADLESS_WEBHOOK_SECRET', 'HEADLESS_STORE_URL', 'CREDENTIALS_DIRECTORY'])
      expect(seen).not.toHaveProperty(name);
  });
});

describe('agent selection', () => {
  async function startWithout(host: TestHost) {
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', wait: true } });
    return { status: res.status, body: (await res.json()) as { agent?: string; code?: string } };
  }

  it('uses the fixed headless agent, then the most recent, then defaults, then registry order', async () => {
    const { createTestHost: make } = await import('../helpers/harness');
    const ws = { id: 'ws', agents: ['fake', 'other1'] };
    const extra = { other1: { command: process.execPath, args: ['-e', ''] } };
    const fixed = await make({
      workspaces: [{ ...ws, path: '/tmp', headlessAgent: 'other1' }],
      agents: { fake: (await import('../helpers/harness')).fakeAgent, ...extra },
    });
    expect((await startWithout(fixed)).body.agent).toBe('other1');
    const byDefault = await make({
      workspaces: [{ ...ws, path: '/tmp', defaultAgent: 'other1' }],
      agents: { fake: (await import('../helpers/harness')).fakeAgent, ...extra },
    });
    expect((await startWithout(byDefault)).body.agent).toBe('other1');
    const install = await make({
      workspaces: [{ ...ws, path: '/tmp' }],
      defaultAgent: 'other1',
      agents: { fake: (await import('../helpers/harness')).fakeAgent, ...extra },
    });
    expect((await startWithout(install)).body.agent).toBe('other1');
    // Registry order: built-ins are not installed here, so the first config agent wins.
    const order = await make({
      workspaces: [{ ...ws, path: '/tmp' }],
      env: { PATH: '/nonexistent' },
      agents: { fake: (await import('../helpers/harness')).fakeAgent, ...extra },
    });
    expect((await startWithout(order)).body.agent).toBe('fake');
    // Most recent beats the defaults once a run named its agent.
    const recent = await make({
      workspaces: [{ ...ws, path: '/tmp', defaultAgent: 'fake' }],
      agents: { fake: (await import('../helpers/harness')).fakeAgent, ...extra },
    });
    await recent.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'other1', wait: true } });
    expect((await startWithout(recent)).body.agent).toBe('other1');
  });

  it('skips candidates that are unknown, not headless, disabled or not installed; none left is no_headless_agent', async () => {
    const host = await createTestHost({
      workspaces: [{ id: 'ws', path: '/tmp', agents: ['shell', 'claude', 'util'], headlessAgent: 'ghost', defaultAgent: 'util' }],
      agents: { util: { command: process.execPath, args: [], kind: 'utility' } },
      env: { PATH: '/nonexistent' },
    });
    expect(await startWithout(host)).toMatchObject({ status: 400, body: { code: 'no_headless_agent' } });
  });
});

describe('disposing the handler', () => {
  it.each(['dispose()', 'Symbol.asyncDispose'] as const)(
    '%s closes the service as close() does: its running run is interrupted and new starts are refused',
    async (how) => {
      const store = createMemoryKeyv();
      const host = await createTestHost({ store });
      const { taskId } = await host.start('sleep 60000');
      await (how === 'dispose()' ? host.handler.dispose() : (host.handler as unknown as AsyncDisposable)[Symbol.asyncDispose]());
      const stored = (await store.get(`run:${taskId}`)) as { status: string };
      expect(stored.status).toBe('interrupted');
      expect(await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } }))).toMatchObject({
        status: 503,
        code: 'shutting_down',
      });
      await host.close();
    },
  );
});

describe('a wait: true start still queued when the service closes', () => {
  it('is answered 503 shutting_down whose status is the HTTP one, with the run in taskId, runStatus and Location', async () => {
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: {} });
    await host.start('sleep 60000');
    const waiting = host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo later', agent: 'fake', wait: true } });
    let queued: string | undefined;
    await waitFor(
      async () => {
        const list = (await (await host.request('GET', '/api/headless?wsId=ws&status=queued')).json()) as { runs: Array<{ taskId: string }> };
        queued = list.runs[0]?.taskId;
        return queued !== undefined;
      },
      { what: 'the wait: true start to be queued' },
    );
    const closed = host.close();
    const answer = await waiting;
    await closed;
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('location')).toBe(`/api/headless/${queued}`);
    const body = (await answer.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 503, code: 'shutting_down', taskId: queued, runStatus: 'queued' });
  });
});
