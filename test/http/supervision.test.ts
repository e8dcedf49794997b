import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost, fakeAgent, problem } from '../helpers/harness';
import { isDead, markedCount, noneMarked } from '../helpers/processes';
import { eventually } from '../helpers/wait';

afterEach(closeAllHosts);

async function syncRun(host: Awaited<ReturnType<typeof createTestHost>>, prompt: string, extra: Record<string, unknown> = {}) {
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt, agent: 'fake', wait: true, ...extra } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const grandchildPid = (stdout: string) => Number(/grandchild (\d+)/.exec(stdout)?.[1]);

const dead = isDead;

describe('process supervision (real processes)', () => {
  it('stdin is closed: an agent reading stdin to EOF completes', async () => {
    const host = await createTestHost();
    const { body } = await syncRun(host, 'read-stdin', { timeoutMs: 10_000 });
    expect(body.status).toBe('succeeded');
    expect(body.output.stdout).toBe('stdin 0\n');
  });

  it('a grandchild holding stdout neither keeps the run open nor outlives it', async () => {
    const host = await createTestHost();
    const started = Date.now();
    const { body } = await syncRun(host, 'grandchild 60000; echo bye');
    expect(body.status).toBe('succeeded');
    // Finalised by exit + bounded drain (2 s), not when the grandchild's 60 s end.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await dead(grandchildPid(body.output.stdout))).toBe(true);
  });

  it('a grandchild that left the group with setsid is found by the run marker and killed', async () => {
    const host = await createTestHost();
    const { body } = await syncRun(host, 'setsid-grandchild 60000; echo bye');
    expect(body.status).toBe('succeeded');
    expect(await dead(grandchildPid(body.output.stdout))).toBe(true);
    expect(await noneMarked([body.taskId])).toBe(true);
  });

  // SIGKILL, not the 60 s sleep's end, is what ends it: no bound on wall-clock time is needed to show it.
  it('an agent ignoring SIGTERM with a grandchild is timed_out by SIGKILL after the grace, the whole tree dead', async () => {
    const host = await createTestHost();
    const { body } = await syncRun(host, 'ignore-term; grandchild 60000; sleep 60000', { timeoutMs: 20_000 });
    expect(body).toMatchObject({ status: 'timed_out', signal: 'SIGKILL', exitCode: null, error: { code: 'timed_out' } });
    expect(body.output.stdout).toContain('got TERM');
    expect(await dead(grandchildPid(body.output.stdout))).toBe(true);
    expect(await noneMarked([body.taskId])).toBe(true);
  }, 600_000);

  it('cancel stops the whole process group', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('grandchild 60000; sleep 60000');
    // Both started (however busy the machine is): the agent and its grandchild carry the marker.
    expect(await eventually(() => markedCount([taskId]) === 2, { timeoutMs: 240_000 })).toBe(true);
    await host.request('POST', `/api/headless/${taskId}/cancel`);
    expect(await host.waitEnded(taskId)).toMatchObject({ status: 'cancelled' });
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('the environment: admin token and nesting breakers removed, workspace env and run variables added', async () => {
    const token = 'super-secret-admin-token-0123456789';
    const host = await createTestHost({
      adminToken: token,
      apiUrl: 'http://127.0.0.1:47331',
      env: {
        PATH: process.env.PATH,
        HOME: '/tmp',
        CLAUDECODE: '1',
        CLAUDE_CODE_ENTRYPOINT: 'cli',
        CLAUDE_CODE_SESSION_ID: 'x',
        CLAUDE_CODE_CHILD_SESSION: '1',
        CLAUDE_CODE_OAUTH_TOKEN: 'oauth-credential',
        CLAUDE_CODE_USE_BEDROCK: '1',
        PWD: '/somewhere/the/daemon/started',
        NODE_OPTIONS: '--require /tmp/evil.js',
        HEADLESS_ADMIN_TOKEN: token,
        SOME_OTHER_NAME: `prefix-${token}`,
        HEADLESS_RUN_TOKEN: 'inherited-should-be-replaced',
        KEEP_ME: 'yes',
      },
      workspaces: [
        { id: 'ws', path: '/tmp', agents: ['fake'], env: { FROM_WORKSPACE: 'ws-value', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', PWD: '/elsewhere' } },
      ],
    });
    const { body } = await syncRun(host, 'dump-env');
    const stdout = body.output.stdout as string;
    expect(stdout).not.toContain(token);
    const env = JSON.parse(stdout) as Record<string, string>;
    for (const name of [
      'CLAUDECODE',
      'CLAUDE_CODE_ENTRYPOINT',
      'CLAUDE_CODE_SESSION_ID',
      'CLAUDE_CODE_CHILD_SESSION',
      'NODE_OPTIONS',
      'HEADLESS_ADMIN_TOKEN',
      'SOME_OTHER_NAME',
    ]) {
      expect(env[name], name).toBeUndefined();
    }
    expect(env).toMatchObject({
      KEEP_ME: 'yes',
      FROM_WORKSPACE: 'ws-value',
      // Credentials and settings of Claude Code pass; PWD is always the workspace.
      CLAUDE_CODE_OAUTH_TOKEN: 'oauth-credential',
      CLAUDE_CODE_USE_BEDROCK: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      PWD: '/tmp',
      HEADLESS_API_URL: 'http://127.0.0.1:47331',
      HEADLESS_WORKSPACE_ID: 'ws',
      HEADLESS_TASK_ID: body.taskId,
      HEADLESS_RESUME_ID: body.resumeId,
    });
    expect(env.HEADLESS_RUN_TOKEN).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const { output: _output, ...record } = body;
    expect(JSON.stringify(record)).not.toContain(env.HEADLESS_RUN_TOKEN);
  });

  it('runs in the workspace directory, with the prompt as one argv element even when it starts with --', async () => {
    const host = await createTestHost({
      agents: { fake: { command: process.execPath, args: [resolve(__dirname, '../fixtures/print-argv.mjs'), '{prompt}'] } },
    });
    const { body } = await syncRun(host, '--help; rm -rf / $(id) `x`');
    const [cwd, argv] = (body.output.stdout as string).trim().split('\n');
    expect(cwd).toBe(host.dir);
    expect(JSON.parse(argv!)).toEqual(['--help; rm -rf / $(id) `x`']);
  });

  it('binary output (invalid UTF-8, NUL, ANSI) keeps the record JSON-serialisable', async () => {
    const host = await createTestHost({
      agents: { fake: { command: process.execPath, args: ['-e', 'process.stdout.write(Buffer.from([0xff, 0xfe, 0, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x41]))'] } },
    });
    const { status, body } = await syncRun(host, 'x');
    expect(status).toBe(200);
    expect(body.output.stdout).toContain('A');
  });

  it('a missing executable is 500 spawn_failed with a failed record, and frees its slot', async () => {
    const host = await createTestHost({
      maxConcurrentRuns: 2,
      agents: { fake: fakeAgent, ghost: { command: '/nonexistent/agent', args: [] } },
      workspaces: [{ id: 'ws', path: '/tmp', agents: ['fake', 'ghost'] }],
    });
    for (let i = 0; i < 4; i++) {
      const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'ghost' } });
      const body = (await res.json()) as { code: string; taskId: string; detail: string };
      expect(res.status).toBe(500);
      expect(body.code).toBe('spawn_failed');
      expect(body.detail).toContain('ENOENT');
      const record = (await (await host.request('GET', `/api/headless/${body.taskId}`)).json()) as Record<string, any>;
      expect(record).toMatchObject({ status: 'failed', exitCode: null, error: { code: 'spawn_failed' } });
    }
    const ok = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', wait: true } });
    expect(ok.status).toBe(200);
  });

  it('an agent that exits 0 but reports failure is failed (adapter verdict)', async () => {
    const host = await createTestHost({
      agents: {
        fake: {
          name: 'fake',
          kind: 'agent',
          command: process.execPath,
          supportsResume: false,
          invocation: () => ({ command: process.execPath, args: ['-e', 'console.log(JSON.stringify({type:"result",is_error:true,result:"rate limited"}))'] }),
          parser: () => {
            let error: string | undefined;
            const line = (l: string) => {
              if (l.includes('is_error')) error = 'rate limited';
            };
            return { line, sessionId: () => undefined, finish: () => ({ error }) };
          },
        },
      },
    });
    const { body } = await syncRun(host, 'x');
    expect(body).toMatchObject({ status: 'failed', exitCode: 0, error: { code: 'agent_error', message: 'rate limited' } });
  });
});

describe('capacity', () => {
  it('C=4, 24 simultaneous starts: exactly 4 admitted, 20 × 429 with Retry-After, every round', async () => {
    const host = await createTestHost({ maxConcurrentRuns: 4 });
    for (let round = 0; round < 5; round++) {
      const responses = await Promise.all(
        Array.from({ length: 24 }, () => host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'sleep 30000', agent: 'fake' } })),
      );
      const admitted = responses.filter((r) => r.status === 202);
      const refused = responses.filter((r) => r.status === 429);
      expect(admitted).toHaveLength(4);
      expect(refused).toHaveLength(20);
      expect(refused.every((r) => Number(r.headers.get('retry-after')) > 0)).toBe(true);
      expect((await problem(refused[0]!)).code).toBe('capacity_reached');
      const ids = await Promise.all(admitted.map(async (r) => ((await r.json()) as { taskId: string }).taskId));
      expect(markedCount(ids)).toBeLessThanOrEqual(4);
      for (const id of ids) await host.request('POST', `/api/headless/${id}/cancel`);
      for (const id of ids) await host.waitEnded(id);
    }
  }, 600_000);

  it('sync runs count against capacity', async () => {
    const host = await createTestHost({ maxConcurrentRuns: 2 });
    // Held open until the third start is answered: no race is won by timing.
    const gate = join(mkdtempSync(join(tmpdir(), 'hrw-gate-')), 'open');
    const syncs = [0, 1].map(() => host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: `wait-file ${gate}`, agent: 'fake', wait: true } }));
    const running = async () => ((await (await host.request('GET', '/api/headless?wsId=ws&status=running')).json()) as { runs: unknown[] }).runs.length;
    expect(await eventually(async () => (await running()) === 2, { timeoutMs: 240_000 })).toBe(true);
    const refused = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake' } });
    expect(refused.status).toBe(429);
    writeFileSync(gate, '');
    expect((await Promise.all(syncs)).map((r) => r.status)).toEqual([200, 200]);
    rmSync(dirname(gate), { recursive: true, force: true });
    expect((await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', wait: true } })).status).toBe(200);
  });
});

describe('a custom adapter whose parser throws', () => {
  it('the run ends failed, the service keeps working', async () => {
    const throwing = {
      name: 'throwing',
      kind: 'agent' as const,
      command: process.execPath,
      supportsResume: false,
      invocation: () => ({ command: process.execPath, args: [fakeAgent.args[0]!, 'echo hi'] }),
      parser: () => ({
        line: () => {
          throw new Error('cannot parse');
        },
        sessionId: () => undefined,
        finish: () => {
          throw new Error('cannot judge');
        },
      }),
    };
    const host = await createTestHost({ agents: { fake: fakeAgent, throwing }, workspaces: [{ id: 'ws', path: '/tmp', agents: ['fake', 'throwing'] }] });
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'throwing', wait: true } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      status: 'failed',
      exitCode: 0,
      error: { code: 'agent_error', message: 'the agent adapter could not read the output' },
    });
    expect((await syncRun(host, 'echo still here')).body).toMatchObject({ status: 'succeeded' });
  });
});
