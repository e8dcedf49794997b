import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { dirname, join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, type Daemon, api, cleanupDaemons, runCli, startDaemon, startFakeDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { HOSTILE_NAME, seedUsage } from '../helpers/usage-runs';
import { waitFor } from '../helpers/wait';
import { CALLER_COMMANDS } from '../../src/cli/caller/names';

/** The caller commands against the real daemon: output for people and machines, and exit codes. */

const dirs: string[] = [];
let daemon: Daemon;

beforeAll(async () => {
  daemon = await startFakeDaemon(dirs);
});
afterAll(async () => {
  await daemon.stop();
  cleanupDaemons(dirs);
});

const cli = (args: string[], env: Record<string, string> = {}) =>
  runCli(args, { cwd: dirs[0]!, env: { HEADLESS_URL: daemon.url, HEADLESS_WORKSPACE: 'ws', ...env }, timeoutMs: 240_000 });
const json = (out: string) => JSON.parse(out) as Record<string, any>;

describe('headless-run-webhook run / status / list / cancel / inbox / sessions', () => {
  it('run (async) prints the taskId; --json the start answer; status shows the record', async () => {
    const started = await cli(['run', 'echo hi', '--agent', 'fake']);
    expect(started.code).toBe(0);
    const taskId = /started (run_\S+)/.exec(started.stdout)![1]!;
    const asJson = await cli(['run', 'echo hi', '--agent', 'fake', '--json']);
    expect(json(asJson.stdout)).toMatchObject({ status: 'running', taskId: expect.stringMatching(/^run_/) });
    await waitFor(async () => (await cli(['status', taskId])).code === 0 && (await cli(['status', taskId])).stdout.includes('succeeded'), {
      what: 'the run to end',
    });
    expect(json((await cli(['status', taskId, '--json'])).stdout)).toMatchObject({ taskId, status: 'succeeded' });
  });

  it('exit codes say how a waited run ended: 0 succeeded, 1 failed, 3 timed out, 4 cancelled', async () => {
    const ok = await cli(['run', 'echo fine', '--agent', 'fake', '--wait', '--json']);
    expect(ok.code).toBe(0);
    expect(json(ok.stdout)).toMatchObject({ status: 'succeeded', exitCode: 0 });
    const failed = await cli(['run', 'exit 3', '--agent', 'fake', '--wait']);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/failed/);
    const late = await cli(['run', 'sleep 5000', '--agent', 'fake', '--wait', '--timeout', '300']);
    expect(late.code).toBe(3);
    // Held open until it is cancelled (the file never appears; the agent gives up after 60 s).
    const waiting = cli(['run', `wait-file ${join(dirs[0]!, 'never')}`, '--agent', 'fake', '--wait', '--json']);
    let taskId = '';
    await waitFor(
      async () => {
        const running = ((await (await api(daemon, 'GET', '/api/headless?wsId=ws&status=running')).json()) as { runs: Array<{ taskId: string }> }).runs;
        taskId = running[0]?.taskId ?? '';
        return taskId !== '';
      },
      { timeoutMs: 240_000, what: 'the run to start' },
    );
    expect((await cli(['cancel', taskId])).code).toBe(0);
    const cancelled = await waiting;
    expect(cancelled.code).toBe(4);
    expect(json(cancelled.stdout).status).toBe('cancelled');
  });

  it('--follow prints each event as it comes (JSON lines with --json)', async () => {
    const text = await cli(['run', 'session f1; echo x', '--agent', 'fake', '--follow']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/run\.started .*fake in ws/);
    expect(text.stdout).toMatch(/agent\.session/);
    expect(text.stdout).toMatch(/run\.ended +succeeded/);
    const lines = (await cli(['run', 'echo y', '--agent', 'fake', '--follow', '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => json(l));
    expect(lines.map((l) => l.type)).toEqual(['run.started', 'run.ended']);
  });

  it('list, inbox, sessions', async () => {
    const { stdout } = await cli(['run', 'session s-cli; echo x', '--agent', 'fake', '--wait', '--json']);
    const { resumeId, taskId } = json(stdout);
    const listed = json((await cli(['list', '--limit', '3', '--json'])).stdout) as unknown as Array<{ taskId: string }>;
    expect(listed).toHaveLength(3);
    expect(listed[0]!.taskId).toBe(taskId);
    expect((await cli(['list', '--status', 'succeeded'])).stdout).toMatch(/succeeded/);
    await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'cli note' });
    const items = json((await cli(['inbox', '--unread', '--json'])).stdout) as unknown as Array<{ id: string; title: string }>;
    const note = items.find((i) => i.title === 'cli note')!;
    expect((await cli(['inbox', 'read', note.id])).code).toBe(0);
    expect(json((await cli(['sessions', resumeId, '--json'])).stdout)).toMatchObject({ resumeId, resumable: true });
    expect((await cli(['sessions', 'retire', resumeId])).stdout).toMatch(/retired/);
  });

  it('follow and logs read a run already started; list and inbox page with --cursor; inbox shows bodies', async () => {
    const { taskId } = json((await cli(['run', 'session fl1; echo from-the-agent', '--agent', 'fake', '--json'])).stdout);
    const followed = await cli(['follow', taskId]);
    expect(followed.code).toBe(0);
    expect(followed.stdout).toMatch(/run\.started .*\n.*agent\.session[\s\S]*run\.ended +succeeded/);
    const later = (await cli(['follow', taskId, '--after', '1', '--json'])).stdout.trim().split('\n');
    expect(later.map((line) => json(line).type)).toEqual(['agent.session', 'run.ended']);
    const logs = await cli(['logs', taskId]);
    expect([logs.code, logs.stdout]).toEqual([0, expect.stringContaining('from-the-agent')]);
    expect((await cli(['logs', taskId, '--tail', '3'])).stdout).toHaveLength(3);
    expect((await cli(['logs', 'run_nope'])).code).toBe(6);

    const first = await cli(['list', '--limit', '1']);
    const cursor = /next page: --cursor (\S+)/.exec(first.stderr)![1]!;
    const second = await cli(['list', '--limit', '1', '--cursor', cursor, '--json']);
    const [shown] = json(second.stdout) as unknown as Array<{ taskId: string }>;
    expect(shown!.taskId).not.toBe(first.stdout.split(' ')[0]);
    expect((await cli(['list', '--limit', '501'])).code).toBe(2);

    const body = ['line 1', 'line 2', 'line 3', 'line 4', 'line 5'].join('\n');
    const item = (await (await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title: 'with a body', body })).json()) as { id: string };
    const listed = (await cli(['inbox', '--limit', '1'])).stdout;
    expect(listed).toContain(`with a body\n    line 1\n    line 2\n    line 3\n    … (2 more lines: inbox show ${item.id})`);
    const shownItem = await cli(['inbox', 'show', item.id]);
    expect([shownItem.code, shownItem.stdout]).toEqual([0, expect.stringContaining(`with a body\n\n${body}`)]);
    expect(json((await cli(['inbox', 'show', item.id, '--json'])).stdout)).toMatchObject({ id: item.id, readAt: null });
    expect((await cli(['inbox', 'show', 'inb_nope'])).code).toBe(6);
  });

  it('Ctrl-C while waiting stops the waiting, not the run, and says so', async () => {
    const env = { ...process.env, HEADLESS_URL: daemon.url, HEADLESS_WORKSPACE: 'ws' };
    const child = spawn(process.execPath, [CLI, 'run', 'sleep 30000', '--agent', 'fake', '--wait'], { cwd: dirs[0]!, env });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((done) => child.once('exit', done));
    await waitFor(async () => /started (run_\S+)/.test(stderr), { what: 'the run to start' });
    const taskId = /started (run_\S+)/.exec(stderr)![1]!;
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stderr).toContain(`stopped waiting; ${taskId} goes on`);
    expect(json((await cli(['status', taskId, '--json'])).stdout).status).toBe('running');
    expect((await cli(['cancel', taskId, '--wait'])).code).toBe(0);
  });

  it('run --title and --meta label a run; status shows them; list --meta filters by one', async () => {
    const labelled = await cli(['run', 'echo hi', '--agent', 'fake', '--title', 'Triage alert 42', '--meta', 'alert=42', '--meta', 'team=infra', '--wait']);
    expect(labelled.stdout).toContain('  title: Triage alert 42\n  metadata: alert=42 team=infra');
    await cli(['run', 'echo hi', '--agent', 'fake', '--meta', 'alert=43', '--wait']);
    const listed = await cli(['list', '--meta', 'alert=42']);
    expect(listed.stdout.trim().split('\n')).toHaveLength(1);
    expect(listed.stdout).toMatch(/succeeded .* Triage alert 42$/m);
    expect((await cli(['run', 'x', '--meta', 'novalue'])).code).toBe(2);
    expect((await cli(['list', '--meta', 'a=1', '--meta', 'b=2'])).code).toBe(2);
  });

  it('the bare command prints the commands and exits 2; an unknown one too', async () => {
    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('Commands:');
    expect(bare.stderr.split('\n').length).toBeLessThan(30);
    // Every command is listed: the caller's, and the daemon's own.
    for (const command of [...CALLER_COMMANDS, 'serve', 'doctor', 'mcp']) expect(bare.stderr, command).toMatch(new RegExp(`\\n  ${command} +\\S`));
    expect((await cli(['--help'])).code).toBe(0);
    const unknown = await cli(['stats']);
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringContaining('unknown command "stats"')]);
  });

  it('shows text from the service with its control characters written out: no clipboard writes, no faked lines', async () => {
    // OSC 52 (set the clipboard) and a carriage return that would overwrite the line with a fake status.
    const title = 'report \x1b]52;c;ZWNobyBwd25lZA==\x07 done\rrun_x  succeeded';
    await api(daemon, 'POST', '/api/workspaces/ws/inbox', { title });
    const { stdout } = await cli(['inbox', '--unread']);
    for (const control of ['\x1b', '\x07', '\r']) expect(stdout).not.toContain(control);
    expect(stdout).toContain('report \\x1b]52;c;ZWNobyBwd25lZA==\\x07 done\\x0drun_x  succeeded');
    // --json keeps the text exact (escaped by JSON).
    const items = json((await cli(['inbox', '--unread', '--json'])).stdout) as unknown as Array<{ title: string }>;
    expect(items.map((i) => i.title)).toContain(title);
  });

  it('--help and --version on every command; bad usage is exit 2; a refusal or no service is exit 6', async () => {
    for (const command of ['run', 'status', 'follow', 'logs', 'list', 'cancel', 'inbox', 'sessions', 'serve', 'doctor', 'mcp']) {
      const help = await cli([command, '--help']);
      expect(help.code, command).toBe(0);
      expect(help.stdout, command).toMatch(new RegExp(`Usage: headless-run-webhook ${command}`));
      expect((await cli([command, '--version'])).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    }
    expect((await cli(['run'])).code).toBe(2);
    expect((await cli(['list', '--status', 'nope'])).code).toBe(2);
    expect((await cli(['status', 'run_x', '--wait'])).code).toBe(2);
    const missing = await cli(['status', 'run_nope']);
    expect(missing.code).toBe(6);
    expect(missing.stderr).toMatch(/run_not_found/);
    const refusedJson = await cli(['status', 'run_nope', '--json']);
    expect(json(refusedJson.stdout).error).toMatchObject({ status: 404, code: 'run_not_found' });
    const down = await cli(['status', 'run_x'], { HEADLESS_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(6);
    expect(down.stderr).toMatch(/network/);
  });

  it('a caller command loads two CommonJS files, cli.cjs and cli-caller.cjs, which load nothing more', () => {
    // What a file loads before a line of the command: a package, a chunk shared with the server,
    // or Node's fetch would each cost the command's start (docs/performance.md). The daemon's
    // commands are imported only when they run.
    const text = (file: string) => readFileSync(join(dirname(CLI), file), 'utf8');
    const loads = (file: string) =>
      [...text(file).matchAll(/\b(?:require|import)\(\s*["']([^"']+)["']\s*\)|^import\s[^;]*?["']([^"']+)["']/gm)].map((m) => m[1] ?? m[2]);
    expect(CLI.endsWith('cli.cjs')).toBe(true);
    expect(new Set(loads('cli.cjs'))).toEqual(new Set(['./cli-caller.cjs', './cli-serve.js', './cli-doctor.js', './cli-mcp.js']));
    expect(loads('cli-caller.cjs')).toEqual([]);
    expect(text('cli-caller.cjs'), 'no request schema: the caller only reads answers').not.toContain('StartBody');
  });

  it('speaks HTTPS, checking the certificate: trusted through NODE_EXTRA_CA_CERTS it follows a run; untrusted it is exit 6', async () => {
    // A TLS front for the daemon, with a certificate made for 127.0.0.1 here.
    const dir = tempDir();
    dirs.push(dir);
    const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const target = new URL(daemon.url);
    const front = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => {
      const back = connect(Number(target.port), target.hostname);
      socket.pipe(back).pipe(socket);
      const close = () => {
        socket.destroy();
        back.destroy();
      };
      socket.on('error', close);
      back.on('error', close);
    });
    await new Promise<void>((done) => front.listen(0, '127.0.0.1', done));
    try {
      const url = `https://127.0.0.1:${(front.address() as AddressInfo).port}`;
      const trusted = { HEADLESS_URL: url, NODE_EXTRA_CA_CERTS: cert };
      const started = await cli(['run', 'echo over tls', '--agent', 'fake', '--follow'], trusted);
      expect(started.code).toBe(0);
      expect(started.stdout).toMatch(/run\.started[\s\S]*run\.ended\s+succeeded/);
      const taskId = /^(run_\S+)\s+succeeded/m.exec(started.stdout)![1]!;
      expect((await cli(['logs', taskId], trusted)).stdout).toContain('over tls');
      expect(json((await cli(['status', taskId, '--json'], trusted)).stdout)).toMatchObject({ taskId, status: 'succeeded' });
      const untrusted = await cli(['status', 'run_x'], { HEADLESS_URL: url });
      expect(untrusted.code).toBe(6);
      expect(untrusted.stderr).toMatch(/network: .*(self[- ]signed|certificate)/i);
    } finally {
      await new Promise((done) => front.close(done));
    }
  });
});

describe('headless-run-webhook schedules, and a queued run', () => {
  it('lists the schedules and runs one now; a start at capacity says it is queued and where; an expired run exits 7', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      maxConcurrentRuns: 1,
      queue: { ttlMs: 100 },
      schedules: [{ name: 'hold', cron: '0 0 1 1 *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'wait-file never; echo x' }],
    });
    const d = await startDaemon(dir);
    const run = (args: string[]) => runCli(args, { cwd: dir, env: { HEADLESS_URL: d.url, HEADLESS_WORKSPACE: 'ws' }, timeoutMs: 240_000 });
    const listed = await run(['schedules']);
    expect(listed).toMatchObject({ code: 0 });
    expect(listed.stdout).toMatch(/^hold {2}0 0 1 1 \* \(UTC\) {2}workspace ws {2}next \d{4}-01-01T00:00:00\.000Z {2}never run$/m);
    const now = await run(['schedules', 'run', 'hold']);
    expect(now.stdout).toMatch(/^started run_\S+ \(session ses_\S+\)$/m);
    const queued = await run(['run', 'echo late', '--agent', 'fake', '--wait']);
    expect(`${queued.stdout}${queued.stderr}`).toMatch(/queued run_\S+ at place 1/);
    expect(queued.stdout).toMatch(/expired/);
    expect(queued.code).toBe(7);
    expect((await run(['schedules', 'run', 'nope'])).code).toBe(6);
    await d.stop();
  });
});

describe('a closed standard output (docs/cli.md)', () => {
  it('`inbox | head -1`: a reader that stops early ends the command quietly, exit 0 and no stack trace', async () => {
    const item = (n: number) => ({
      id: `inb_${n}`,
      workspaceId: 'default',
      taskId: null,
      resumeId: null,
      title: `item ${n}`,
      body: 'x'.repeat(200),
      createdAt: new Date(0).toISOString(),
      readAt: null,
    });
    const page = JSON.stringify({ items: Array.from({ length: 500 }, (_, n) => item(n)), nextCursor: null });
    let closeReader = () => undefined as unknown;
    // The service answers only once the reader has closed the pipe: every line the command prints then meets EPIPE.
    const server = createHttpServer((_, res) => {
      closeReader();
      res.writeHead(200, { 'content-type': 'application/json' }).end(page);
    });
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const child = spawn(process.execPath, [CLI, 'inbox', '--url', url, '--limit', '500'], { stdio: ['ignore', 'pipe', 'pipe'] });
    closeReader = () => child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((exited) => child.on('close', exited));
    server.close();
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});

describe('headless-run-webhook usage', () => {
  it('prints each day (today first) by workspace, agent, schedule and trigger, the estimated part said, then the limits beside today; --json the report', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, { workspaces: [{ id: 'ws', path: '.', agents: ['fake'], limits: { runsPerDay: 100, spendPerDayUsd: 20 } }] });
    const { today, yesterday } = await seedUsage(join(dir, '.headless'));
    const d = await startDaemon(dir);
    const usage = (args: string[]) => runCli(['usage', ...args], { cwd: dir, env: { HEADLESS_URL: d.url } });
    const text = await usage(['--days', '3']);
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines).toContain(`${today}  3 runs  3010 in / 401 out tokens  $0.88 ($0.25 of it estimated)`);
    expect(lines).toContain('  workspace ws  3 runs  3010 in / 401 out tokens  $0.88 ($0.25 of it estimated)');
    expect(lines).toContain('  agent codex  1 run  2000 in / 300 out tokens  $0.25 ($0.25 of it estimated)');
    expect(lines).toContain('  schedule nightly  1 run  2000 in / 300 out tokens  $0.25 ($0.25 of it estimated)');
    expect(lines).toContain(`  trigger ${HOSTILE_NAME}  1 run  10 in / 1 out tokens  $0.13`);
    expect(lines).toContain(`${yesterday}  1 run  5 in / 5 out tokens  $1.00`);
    expect(lines).toContain('daily limits (UTC):');
    expect(lines).toContain('  workspace ws  100 runs a day, $20.00 a day  today 3 runs, $0.88');
    const report = json((await usage(['--workspace', 'ws', '--json'])).stdout);
    expect(report.days).toHaveLength(7);
    expect(report.days.find((x: { day: string }) => x.day === today).total).toEqual({
      runs: 3,
      inputTokens: 3010,
      outputTokens: 401,
      costUsd: 0.875,
      estimatedCostUsd: 0.25,
    });
    expect((await usage(['--days', '0'])).code).toBe(2);
    expect((await usage(['--days', '91'])).code).toBe(2);
    const unknown = await usage(['--workspace', 'nope']);
    expect([unknown.code, unknown.stderr]).toEqual([6, expect.stringContaining('workspace_not_found')]);
    await d.stop();
  });
});
