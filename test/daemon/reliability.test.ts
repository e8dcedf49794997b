import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, START, rows } from '../helpers/bad-inputs';
import { type Daemon, api, cleanupDaemons, startDaemon, startFakeDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { fakeAgent } from '../helpers/harness';
import { markedCount, noneMarked } from '../helpers/processes';
import { type Reply, type Target, rawSender } from '../helpers/targets';
import { waitFor } from '../helpers/wait';

/**
 * Issue "Reliability and security": the figures, proven against the real daemon process with
 * fake agents, loopback only, every loop bounded.
 */

const dirs: string[] = [];
/** Files that release runs held open by `wait-file`. */
const gates = mkdtempSync(join(tmpdir(), 'hrw-gates-'));
let daemon: Daemon;
let send: Target['send'];

beforeAll(async () => {
  const cwd = tempDir();
  dirs.push(cwd);
  writeConfig(cwd, {
    maxConcurrentRuns: 4,
    agents: { fake: fakeAgent, util: { ...fakeAgent, kind: 'utility' } },
    workspaces: [
      { id: 'ws', path: '.', agents: ['fake', 'claude', 'shell', 'util'] },
      { id: 'other', path: '.', agents: ['fake'] },
      { id: 'race', path: '.', agents: ['fake'] },
      { id: 'flood', path: '.', agents: ['fake'] },
    ],
  });
  daemon = await startDaemon(cwd, ['--port', '0'], { HEADLESS_ADMIN_TOKEN: ADMIN_TOKEN });
  send = rawSender(daemon.url);
}, 600_000);

afterAll(async () => {
  rmSync(gates, { recursive: true, force: true });
  await daemon?.stop();
  cleanupDaemons(dirs);
});

/**
 * Live agent processes this daemon started for a workspace, found by the variables every run
 * carries (the API URL holds this daemon's own port, so other test files' agents never count).
 */
function agentsOf(workspaceId: string): number {
  const has = (environ: string, entry: string) => environ.includes(`\0${entry}\0`) || environ.startsWith(`${entry}\0`);
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1');
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
      if (has(environ, `HEADLESS_WORKSPACE_ID=${workspaceId}`) && has(environ, `HEADLESS_API_URL=${daemon.url}`)) count += 1;
    } catch {
      // Gone meanwhile.
    }
  }
  return count;
}

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

const waitEnded = (taskId: string) => waitRun(daemon, taskId);

describe('hostile input against the daemon', () => {
  const socketRows = rows.filter((row) => row.options.remote === undefined);

  it('covers at least 60 bad inputs over the real socket', () => {
    expect(socketRows.length).toBeGreaterThanOrEqual(60);
  });

  it.each(socketRows)('$name → $status $code', async (row) => {
    const headers: Record<string, string> = { ...(row.options.json !== undefined ? { 'content-type': 'application/json' } : {}), ...row.options.headers };
    const body = row.options.json !== undefined ? JSON.stringify(row.options.json) : row.options.body;
    const res: Reply | Error = await send(row.method ?? 'POST', row.path ?? START, { headers, body }).catch((error: Error) => error);
    if (res instanceof Error) {
      // A body over the limit may be cut off by the server once it has answered 413.
      expect(row.status, res.message).toBe(413);
      return;
    }
    expect(res.status, res.text).toBe(row.status);
    expect(res.status).toBeLessThan(500);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(res.json().code).toBe(row.code);
    expect(res.text).not.toContain(ADMIN_TOKEN);
  });

  it('an HTTP/1.0 request without any Host header is 403', async () => {
    const { connect } = await import('node:net');
    const answer = await new Promise<string>((done, fail) => {
      const socket = connect(daemon.port, '127.0.0.1', () => socket.end('GET /api/headless?wsId=ws HTTP/1.0\r\n\r\n'));
      let text = '';
      socket.on('data', (c) => (text += c.toString()));
      socket.on('end', () => done(text));
      socket.on('error', fail);
    });
    expect(answer).toMatch(/^HTTP\/1\.[01] 403/);
    expect(answer).toContain('"code":"forbidden"');
  });

  it('started no process and stored no run for any of them', async () => {
    for (const ws of ['ws', 'other']) {
      expect(((await (await api(daemon, 'GET', `/api/headless?wsId=${ws}`)).json()) as { runs: unknown[] }).runs).toEqual([]);
    }
    expect(agentsOf('ws')).toBe(0);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('races', () => {
  it('capacity C=4, 24 simultaneous starts × 50 rounds: exactly 4 admitted every round, never more than 4 agents alive', async () => {
    let maxAlive = 0;
    const sampler = setInterval(() => {
      maxAlive = Math.max(maxAlive, agentsOf('race'));
    }, 10);
    try {
      for (let round = 0; round < 50; round++) {
        // Every admitted run is held open until all 24 answers are in: none can end and free its slot meanwhile.
        const gate = join(gates, `round-${round}`);
        const results = await Promise.all(
          Array.from({ length: 24 }, () => api(daemon, 'POST', '/api/workspaces/race/headless', { prompt: `wait-file ${gate}` })),
        );
        const admitted = results.filter((r) => r.status === 202);
        expect(admitted.length, `round ${round}`).toBe(4);
        expect(results.filter((r) => r.status === 429)).toHaveLength(20);
        for (const r of results.filter((x) => x.status === 429)) expect(r.headers.get('retry-after')).toBe('5');
        const ids = await Promise.all(admitted.map(async (r) => ((await r.json()) as { taskId: string }).taskId));
        writeFileSync(gate, '');
        for (const id of ids) await waitEnded(id);
      }
    } finally {
      clearInterval(sampler);
    }
    expect(maxAlive).toBeGreaterThan(0);
    expect(maxAlive).toBeLessThanOrEqual(4);
  }, 180_000);

  it('10 simultaneous resumes of one Session: exactly 1 admitted', async () => {
    const first = (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'session race-1', agent: 'fake', wait: true })).json()) as {
      resumeId: string;
    };
    // The winner is held open until all 10 answers are in, so a second cannot win after it ends.
    const gate = join(gates, 'resume');
    const results = await Promise.all(
      Array.from({ length: 10 }, () => api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: `wait-file ${gate}`, resumeId: first.resumeId })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([202, ...Array(9).fill(409)]);
    writeFileSync(gate, '');
    const winner = (await results.find((r) => r.status === 202)!.json()) as { taskId: string };
    await waitEnded(winner.taskId);
  });
});

describe('process faults', () => {
  it('an agent ignoring SIGTERM with a grandchild, timeoutMs 20000: timed_out by SIGKILL after the grace, the whole tree dead', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', {
      prompt: 'ignore-term; grandchild 60000; sleep 60000',
      agent: 'fake',
      // Long enough that both are up before the watchdog acts, on a busy machine too.
      timeoutMs: 20_000,
    });
    const { taskId } = (await res.json()) as { taskId: string };
    // Both are up (the agent and its grandchild) before the watchdog's 20 s: waited for, not assumed.
    await waitFor(() => markedCount([taskId]) === 2, { timeoutMs: 240_000, what: 'the agent and its grandchild' });
    const record = await waitEnded(taskId);
    expect(record).toMatchObject({ status: 'timed_out', signal: 'SIGKILL' });
    expect(await noneMarked([taskId])).toBe(true);
  }, 600_000);

  it('a grandchild that calls setsid and holds stdout: the record finalises and the grandchild is reaped', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'setsid-grandchild 60000; echo bye', agent: 'fake', wait: true });
    const body = (await res.json()) as { taskId: string; status: string; output: { stdout: string } };
    expect(body.status).toBe('succeeded');
    expect(await noneMarked([body.taskId])).toBe(true);
  });

  it('4 concurrent 1 GB stdout floods: daemon RSS growth stays under 100 MB and GETs keep answering', async () => {
    const pid = daemon.child.pid!;
    await api(daemon, 'POST', '/api/workspaces/flood/headless', { prompt: 'echo warm', wait: true });
    const baseline = rssKb(pid);
    let peak = baseline;
    let answered = 0;
    let failedGets = 0;
    const floods = Array.from({ length: 4 }, () =>
      api(daemon, 'POST', '/api/workspaces/flood/headless', { prompt: 'flood 1024', wait: true }).then((r) => r.json() as Promise<Record<string, any>>),
    );
    let done = false;
    const all = Promise.all(floods).finally(() => {
      done = true;
    });
    while (!done) {
      peak = Math.max(peak, rssKb(pid));
      const res = await api(daemon, 'GET', '/api/headless?wsId=flood&limit=5');
      if (res.status === 200) answered += 1;
      else failedGets += 1;
      await res.arrayBuffer();
      await new Promise((r) => setTimeout(r, 50));
    }
    const results = await all;
    for (const result of results) {
      expect(result.status).toBe('succeeded');
      expect(result.output.stdout.length).toBe(64 * 1024);
      expect(result.output.truncated).toBe(true);
    }
    expect(failedGets).toBe(0);
    expect(answered).toBeGreaterThan(5);
    const growthMb = (peak - baseline) / 1024;
    console.log(
      `flood: daemon RSS ${Math.round(baseline / 1024)} MB → peak ${Math.round(peak / 1024)} MB (growth ${growthMb.toFixed(1)} MB), ${answered} GETs answered`,
    );
    expect(growthMb).toBeLessThan(100);
  }, 600_000);
});

describe('graceful shutdown', () => {
  it('SIGTERM: new starts get 503 shutting_down while reads keep working, then exit 0', async () => {
    const own = await startFakeDaemon(dirs);
    const { taskId } = (await (await api(own, 'POST', '/api/workspaces/ws/headless', { prompt: 'ignore-term; echo ready; sleep 60000' })).json()) as {
      taskId: string;
    };
    // Each step waits for a state, not a moment: the agent ignores SIGTERM, then the daemon has begun
    // its shutdown (it told the run to stop), so it now holds on for the run's 2 s grace.
    const printed = async (text: string) =>
      ((await (await api(own, 'GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout.includes(text);
    await waitFor(() => printed('ready'), { timeoutMs: 240_000, intervalMs: 20, what: 'the agent to ignore SIGTERM' });
    const exited = own.stop('SIGTERM');
    await waitFor(() => printed('got TERM'), { timeoutMs: 240_000, intervalMs: 20, what: 'the daemon to stop its run' });
    const refused = await api(own, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo x' });
    expect(await refused.json()).toMatchObject({ status: 503, code: 'shutting_down' });
    expect((await api(own, 'GET', `/api/headless/${taskId}`)).status).toBe(200);
    expect(await exited).toBe(0);
  }, 600_000);

  it('SIGTERM: a wait: true start still in the queue is answered 503 shutting_down naming its run, which runs after the restart', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, { maxConcurrentRuns: 1, queue: {} });
    const own = await startDaemon(dir);
    const busy = await api(own, 'POST', '/api/workspaces/ws/headless', { prompt: 'sleep 60000' });
    expect(busy.status).toBe(202);
    const waiting = api(own, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo later', wait: true });
    let queuedId: string | undefined;
    await waitFor(
      async () => {
        const list = (await (await api(own, 'GET', '/api/headless?wsId=ws&status=queued')).json()) as { runs: Array<{ taskId: string }> };
        queuedId = list.runs[0]?.taskId;
        return queuedId !== undefined;
      },
      { what: 'the wait: true start to be queued' },
    );
    const exited = own.stop('SIGTERM');
    const answer = await waiting;
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('location')).toBe(`/api/headless/${queuedId}`);
    expect(await answer.json()).toMatchObject({ code: 'shutting_down', status: 503, taskId: queuedId, runStatus: 'queued' });
    expect(await exited).toBe(0);
    const again = await startDaemon(dir);
    try {
      expect(await waitRun(again, queuedId as string)).toMatchObject({ status: 'succeeded' });
    } finally {
      await again.stop();
    }
  }, 600_000);
});
