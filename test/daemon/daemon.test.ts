import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canMountTmpfs } from '../helpers/mounts';
import { api, daemonDirs, runCli, startDaemon, waitRun, writeConfig } from '../helpers/daemon';
import { markedCount, noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';

const dir = daemonDirs();

function occupy(port: number): Promise<() => Promise<void>> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => done(() => new Promise((r) => server.close(() => r()))));
  });
}

describe('the daemon', () => {
  it('with no config: workspace "default" at the current directory, every built-in agent enabled, listening on 127.0.0.1:47331 (or the next free port)', async () => {
    const cwd = dir();
    const daemon = await startDaemon(cwd, []);
    expect(daemon.stdout()).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\n$/);
    expect(daemon.port).toBeGreaterThanOrEqual(47331);
    expect(daemon.port).toBeLessThan(47351);
    expect((await api(daemon, 'GET', '/api/headless?wsId=default')).status).toBe(200);
    // `shell` is a registered (but never valid) agent of the default workspace: enabled, not headless.
    const shell = await api(daemon, 'POST', '/api/workspaces/default/headless', { prompt: 'x', agent: 'shell' });
    expect(((await shell.json()) as { code: string }).code).toBe('agent_not_headless');
    expect(readdirSync(join(cwd, '.headless'))).toContain('headless.sqlite');
    expect(await daemon.stop('SIGINT')).toBe(0);
  });

  it('port taken: without --port it binds the next free one; with --port it exits naming the port', async () => {
    const cwd = dir();
    const first = await startDaemon(cwd, ['--port', '0']);
    const release = await occupy(first.port + 1).catch(() => undefined);
    await first.stop();
    const taken = await occupy(first.port);
    try {
      const refused = await runCli(['serve', '--port', String(first.port)], { cwd });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(String(first.port));
      expect(refused.stdout).not.toContain('listening on');
    } finally {
      await taken();
      await release?.();
    }
  });

  it('auto-bumps the default port', async () => {
    const cwd = dir();
    const a = await startDaemon(cwd, []);
    const b = await startDaemon(dir(), []);
    expect(b.port).toBeGreaterThan(a.port);
    // Said, so an operator knows which daemon is where.
    expect(b.output()).toMatch(new RegExp(`"level":40,.*"msg":"port 47331 was taken, so this daemon listens on ${b.port}`));
    await Promise.all([a.stop(), b.stop()]);
  });

  it('refuses a non-loopback bind without an admin token, saying why', async () => {
    const result = await runCli(['serve', '--host', '0.0.0.0', '--port', '0'], { cwd: dir(), env: { HEADLESS_ADMIN_TOKEN: '' } });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/without an admin token: give --admin-token-file/);
  });

  it('binds a non-loopback host when an admin token is set, and serves loopback callers with it', async () => {
    const daemon = await startDaemon(dir(), ['--host', '0.0.0.0', '--port', '0'], { HEADLESS_ADMIN_TOKEN: 'tok-123-long-enough-for-the-minimum-length' });
    expect(daemon.output()).toContain('listening on http://0.0.0.0:');
    const res = await fetch(`http://127.0.0.1:${daemon.port}/api/headless?wsId=default`);
    expect(res.status).toBe(200);
    expect(await daemon.stop()).toBe(0);
  });

  it('rejects unknown config keys by name, and bad flags', async () => {
    const cwd = dir();
    writeConfig(cwd, { maxConcurentRuns: 3 });
    const top = await runCli(['serve', '--port', '0'], { cwd });
    expect(top.code).not.toBe(0);
    expect(top.stderr).toContain('unknown key "maxConcurentRuns" (did you mean "maxConcurrentRuns"?)');
    writeConfig(cwd, { workspaces: [{ id: 'ws', path: '.', agnets: [] }] });
    const nested = await runCli(['serve', '--port', '0'], { cwd });
    expect(nested.stderr).toContain('unknown key "workspaces[0].agnets" (did you mean "agents"?)');
    // A misspelt required key is named as such, not as the key it leaves missing; a missing one is said to be.
    writeConfig(cwd, { agents: { mine: { comand: 'x', args: [] } } });
    expect((await runCli(['serve', '--port', '0'], { cwd })).stderr).toContain('unknown key "agents.mine.comand" (did you mean "command"?)');
    writeConfig(cwd, { agents: { mine: { command: 'x' } } });
    expect((await runCli(['serve', '--port', '0'], { cwd })).stderr).toContain('"agents.mine.args" is required');
    writeConfig(cwd, { workspaces: [{ id: 'ws', path: '.', agents: ['fake', 'cluade'] }] });
    const misspelt = await runCli(['serve', '--port', '0'], { cwd });
    expect(misspelt.code).not.toBe(0);
    expect(misspelt.stderr).toContain('"workspaces[0].agents" names unknown agent "cluade"');
    writeConfig(cwd, { agents: { claude: { command: 'x', args: [] } } });
    const clash = await runCli(['serve', '--port', '0'], { cwd });
    expect(clash.stderr).toContain('agent "claude" is a built-in agent');
    const flag = await runCli(['serve', '--prot', '1'], { cwd });
    expect(flag.code).not.toBe(0);
    expect(flag.stderr).toContain('--prot');
    const command = await runCli(['srve'], { cwd });
    expect(command.code).not.toBe(0);
  });

  it('reads --config with paths relative to the config file, and runs an agent end to end', async () => {
    const cwd = dir();
    const confDir = join(cwd, 'conf');
    mkdirSync(join(confDir, 'project'), { recursive: true });
    writeFileSync(join(confDir, 'project', 'marker.txt'), 'here');
    const file = writeConfig(confDir, { workspaces: [{ id: 'ws', path: 'project', agents: ['fake'] }] });
    const daemon = await startDaemon(cwd, ['--config', file, '--port', '0', '--data-dir', 'state']);
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'cwd', wait: true });
    const body = (await res.json()) as { status: string; output: { stdout: string } };
    expect(body.status).toBe('succeeded');
    expect(body.output.stdout).toBe(`${join(confDir, 'project')}\n`);
    expect(readdirSync(join(cwd, 'state'))).toContain('headless.sqlite');
    await daemon.stop();
  });

  it('persists runs, Sessions and the Inbox across a restart', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const first = await startDaemon(cwd);
    const started = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: 'session s-1; echo done' })).json()) as {
      taskId: string;
      resumeId: string;
    };
    const record = await waitRun(first, started.taskId);
    const pushed = (await (await api(first, 'POST', '/api/workspaces/ws/inbox', { title: 'hello', body: 'world' })).json()) as { id: string };
    expect(await first.stop()).toBe(0);
    const second = await startDaemon(cwd);
    expect(await (await api(second, 'GET', `/api/headless/${started.taskId}`)).json()).toEqual(record);
    expect(await (await api(second, 'GET', `/api/sessions/${started.resumeId}`)).json()).toMatchObject({
      resumeId: started.resumeId,
      status: 'idle',
      resumable: true,
      runCount: 1,
    });
    const inbox = (await (await api(second, 'GET', '/api/workspaces/ws/inbox')).json()) as { items: Array<{ id: string }> };
    expect(inbox.items.map((i) => i.id)).toEqual([pushed.id]);
    await second.stop();
  });

  it('SIGTERM: running runs are stopped and recorded interrupted, exit 0 within 10 s', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const daemon = await startDaemon(cwd);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++)
      ids.push(
        (
          (await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'ignore-term; grandchild 60000; sleep 60000' })).json()) as {
            taskId: string;
          }
        ).taskId,
      );
    // Each run's agent and its grandchild are up: "none marked" below then checks the shutdown reached them.
    await waitFor(() => markedCount(ids) >= 4, { what: 'both agents and their grandchildren' });
    const started = Date.now();
    expect(await daemon.stop('SIGTERM')).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await noneMarked(ids)).toBe(true);
    const again = await startDaemon(cwd);
    for (const id of ids) {
      expect(await (await api(again, 'GET', `/api/headless/${id}`)).json()).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    }
    await again.stop();
  });

  it('kill -9 with 3 runs active: after restart all 3 are interrupted, their processes gone, earlier records unchanged; restarting again changes nothing', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const daemon = await startDaemon(cwd);
    const done = ((await (await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo early', wait: true })).json()) as { taskId: string }).taskId;
    const earlier = await (await api(daemon, 'GET', `/api/headless/${done}`)).text();
    const ids: string[] = [];
    const sessions: string[] = [];
    for (let i = 0; i < 3; i++) {
      const started = (await (
        await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: `session crash-${i}; grandchild 60000; sleep 60000` })
      ).json()) as { taskId: string; resumeId: string };
      ids.push(started.taskId);
      sessions.push(started.resumeId);
    }
    // Each agent and its grandchild are up, and each agent's session id is stored, however busy the machine is.
    await waitFor(() => markedCount(ids) === 6, { what: 'three agents and their grandchildren' });
    const resumable = async (resumeId: string) => ((await (await api(daemon, 'GET', `/api/sessions/${resumeId}`)).json()) as { resumable?: boolean }).resumable;
    await waitFor(async () => (await Promise.all(sessions.map(resumable))).every(Boolean), { what: 'the agents’ session ids to be stored' });
    expect(await daemon.stop('SIGKILL')).toBeNull();
    // Detached agents outlive a kill -9 of the daemon: recovery must find them.
    expect(markedCount(ids)).toBe(6);

    const again = await startDaemon(cwd);
    const snapshot: string[] = [];
    for (const id of ids) {
      const text = await (await api(again, 'GET', `/api/headless/${id}`)).text();
      expect(JSON.parse(text)).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
      snapshot.push(text);
    }
    expect(await noneMarked(ids)).toBe(true);
    expect(await (await api(again, 'GET', `/api/headless/${done}`)).text()).toBe(earlier);
    // The agents' session ids stored while they ran are kept: the Sessions are free and resumable.
    for (const resumeId of sessions) {
      expect(await (await api(again, 'GET', `/api/sessions/${resumeId}`)).json()).toMatchObject({ status: 'idle', resumable: true });
    }
    await again.stop();
    for (let round = 0; round < 2; round++) {
      const later = await startDaemon(cwd);
      for (const [i, id] of ids.entries()) expect(await (await api(later, 'GET', `/api/headless/${id}`)).text()).toBe(snapshot[i]);
      await later.stop();
    }
  }, 600_000);

  it('the admin token never reaches the store, the output or a response', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const token = 'admin-token-that-must-not-leak-0123456789';
    const daemon = await startDaemon(cwd, ['--port', '0'], { HEADLESS_ADMIN_TOKEN: token });
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'dump-env', wait: true }, { authorization: `Bearer ${token}` });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text).not.toContain(token);
    await api(daemon, 'GET', '/api/headless?wsId=ws', undefined, { authorization: 'Bearer wrong' });
    await daemon.stop();
    expect(daemon.output()).not.toContain(token);
    const files = readdirSync(join(cwd, '.headless')).map((f) => readFileSync(join(cwd, '.headless', f)).toString('latin1'));
    for (const content of files) expect(content).not.toContain(token);
  });
});

describe('secrets the service holds', () => {
  it("no run sees a trigger's secret (by its variable or its value) or a webhook secret, nor a descriptor the daemon inherited", async () => {
    const cwd = dir();
    const webhookSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    writeConfig(cwd, {
      webhooks: { secret: webhookSecret },
      triggers: [
        { name: 'by-env', workspace: 'ws', sender: 'github', run: { agent: 'fake' }, secret: { env: 'HRW_TEST_TRIGGER_SECRET' }, prompt: 'x' },
        { name: 'by-value', workspace: 'ws', sender: 'github', run: { agent: 'fake' }, secret: 'trigger-secret-by-value-1234', prompt: 'x' },
      ],
    });
    const environment = {
      HRW_TEST_TRIGGER_SECRET: 'trigger-secret-from-env-5678',
      // The same value under another name, as a copy in a URL; the webhook secret's key without its prefix.
      OTHER_COPY: 'https://x:trigger-secret-by-value-1234@example.invalid',
      KEY_COPY: webhookSecret.slice('whsec_'.length),
      HARMLESS: 'kept',
    };
    const inherited = join(cwd, 'inherited-descriptor.txt');
    writeFileSync(inherited, 'what a parent left open');
    const daemon = await startDaemon(cwd, ['--port', '0'], environment, { inherit: inherited });
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'dump-env; sh ls -l /proc/self/fd', wait: true });
    const record = (await res.json()) as { output: { stdout: string } };
    expect(res.status, JSON.stringify(record)).toBe(200);
    const [envLine, ...listing] = record.output.stdout.split('\n');
    const env = JSON.parse(envLine ?? '{}') as Record<string, string>;
    expect(env.HARMLESS).toBe('kept');
    const text = JSON.stringify(env);
    for (const secret of ['HRW_TEST_TRIGGER_SECRET', 'trigger-secret-from-env-5678', 'trigger-secret-by-value-1234', 'OTHER_COPY', 'KEY_COPY', webhookSecret]) {
      expect(text).not.toContain(secret);
    }
    // The daemon was started holding a file open as descriptor 3: the agent has 0, 1 and 2 only (and what ls opens).
    expect(listing.join('\n')).toContain('/proc/');
    expect(listing.join('\n')).not.toContain('inherited-descriptor');
    await daemon.stop();
  });
});

describe('a store locked by another process', () => {
  it('waits the busy timeout, answers 503 storage_unavailable, and writes again once the lock is gone', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const daemon = await startDaemon(cwd);
    expect((await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'before' })).status).toBe(201);
    // Another process's lock, as SQLite sees it: a second connection (the drop-in runs on every Node).
    const { DatabaseSync } = await import('@photostructure/sqlite');
    const db = new DatabaseSync(join(cwd, '.headless', 'headless.sqlite'));
    db.exec('BEGIN EXCLUSIVE');
    try {
      const refused = await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'while locked' });
      expect(await refused.json()).toMatchObject({ status: 503, code: 'storage_unavailable' });
      expect((await api(daemon, 'GET', '/api/headless?wsId=ws')).status).toBe(200);
    } finally {
      db.exec('ROLLBACK');
      db.close();
    }
    expect((await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'after' })).status).toBe(201);
    expect(await daemon.stop()).toBe(0);
  }, 600_000);
});

describe.skipIf(!canMountTmpfs())('disk full (a tiny tmpfs as data dir)', () => {
  it('answers 503 storage_unavailable, never a 2xx, stays up, and recovers when space returns', async () => {
    const cwd = dir();
    writeConfig(cwd);
    const data = join(cwd, 'data');
    mkdirSync(data);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=400k', 'tmpfs', data]);
    try {
      const daemon = await startDaemon(cwd, ['--port', '0', '--data-dir', data]);
      const acked: string[] = [];
      let refused = 0;
      for (let i = 0; i < 40 && refused < 3; i++) {
        const res = await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: `t${i}`, body: 'b'.repeat(60_000) });
        if (res.status === 201) acked.push(((await res.json()) as { id: string }).id);
        else {
          expect(await res.json()).toMatchObject({ status: 503, code: 'storage_unavailable' });
          refused += 1;
        }
      }
      expect(refused).toBe(3);
      const start = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo x' });
      expect([202, 503]).toContain(start.status);
      expect((await api(daemon, 'GET', '/api/headless?wsId=ws')).status).toBe(200);
      execFileSync('mount', ['-o', 'remount,size=8m', data]);
      const again = await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'after', body: 'space is back' });
      expect(again.status).toBe(201);
      const items = (await (await api(daemon, 'GET', '/api/workspaces/ws/inbox?limit=500')).json()) as { items: Array<{ id: string }> };
      for (const id of acked) expect(items.items.map((i) => i.id)).toContain(id);
      expect(await daemon.stop()).toBe(0);
    } finally {
      execFileSync('umount', ['-l', data]);
    }
  }, 600_000);
});
