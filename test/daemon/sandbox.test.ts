import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, type Daemon, adminTokenFile, api, cleanupDaemons, runCli, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { FAKE_AGENT, fakeAgent } from '../helpers/harness';
import { markedCount, noneMarked } from '../helpers/processes';
import { waitFor } from '../helpers/wait';
import { escapeUser } from '../helpers/users';

/**
 * docs/security.md, Confining agents: the same probe run unconfined (where it reaches everything,
 * so each check can fail) and in bubblewrap sandboxes, through the built daemon.
 */

/** npm test installs bubblewrap as root with apt; elsewhere these tests are skipped, saying so, except in CI, where they must run. */
const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);
if (!hasBwrap) console.warn('sandbox tests skipped: bwrap is not installed (apt-get install bubblewrap)');
const PROBE = resolve(__dirname, '../fixtures/sandbox-probe.sh');
const SENTINEL = 'sentinel-in-the-daemon-environment-0123456789';
// Ended after the file, not after each test: the sandbox tests share one daemon.
const dirs: string[] = [];
const dir = () => {
  const d = tempDir();
  dirs.push(d);
  return d;
};
afterAll(() => cleanupDaemons(dirs));

type Reach = Record<string, 'yes' | 'no'>;

/** A Unix-domain socket server at `path` that accepts and closes. */
function unixServer(path: string): Promise<{ path: string; close(): void }> {
  if (!path.startsWith('\0')) rmSync(path, { force: true });
  return new Promise((done) => {
    const server = createServer((socket) => socket.end()).listen(path, () => {
      // Any local user may connect, as to an agent's socket its owner opened up: only the sandbox stands in the way.
      if (!path.startsWith('\0')) chmodSync(path, 0o666);
      done({
        path,
        close: () => {
          server.close();
          if (!path.startsWith('\0')) rmSync(path, { force: true });
        },
      });
    });
  });
}

/** A TCP server on loopback that accepts and closes. */
function tcpServer(): Promise<{ port: number; close(): void }> {
  return new Promise((done) => {
    const server = createServer((socket) => socket.end()).listen(0, '127.0.0.1', () =>
      done({ port: (server.address() as { port: number }).port, close: () => server.close() }),
    );
  });
}

async function probe(daemon: Daemon, workspace: string): Promise<{ reach: Reach; record: Record<string, any> }> {
  const res = await api(
    daemon,
    'POST',
    `/api/workspaces/${workspace}/headless`,
    { prompt: 'x', agent: 'probe', wait: true },
    { authorization: `Bearer ${ADMIN_TOKEN}` },
  );
  const record = (await res.json()) as Record<string, any>;
  expect(res.status, JSON.stringify(record)).toBe(200);
  const reach = Object.fromEntries(
    (record.output.stdout as string)
      .trim()
      .split('\n')
      .map((line) => line.split('=')),
  ) as Reach;
  return { reach, record };
}

/**
 * Who the daemon runs as: root (as in most containers and CI), and an unprivileged user made for
 * the test (bubblewrap then needs unprivileged user namespaces, as Debian ships them). Not root:
 * only the current user.
 */
const isRoot = process.getuid?.() === 0;
/** The uid of the user variant's daemon. */
const daemonUid = () => (isRoot ? escapeUser().uid : (process.getuid?.() ?? -1));
const VARIANTS = isRoot ? (['root', 'user'] as const) : (['user'] as const);

/** What the unconfined probe reaches that it should not be able to, as this user: everything but the proxy, and as a user, no root's files or capabilities. */
const unconfinedNo = (variant: string) => [
  'proxy-allowed',
  'proxy-other',
  ...(variant === 'user' && isRoot ? ['etc-shadow', 'has-caps', 'root-file', 'proc-sys'] : []),
];
/** Under a root daemon, sandboxed agents run as this host user (docs/security.md: a root daemon). */
const SANDBOX_USER = '65532:65532';

describe.skipIf(!hasBwrap).each(VARIANTS)('a sandboxed run (bubblewrap), the daemon run as %s', (variant) => {
  let daemon: Daemon;
  let cwd: string;
  let home: string;
  let servers: Array<{ port: number; close(): void }> = [];
  let sockets: Array<{ path: string; close(): void }> = [];
  const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };

  beforeAll(async () => {
    cwd = dir();
    home = join(cwd, 'home');
    for (const name of ['box', 'boxro', 'open', 'other', 'outside', 'rootbox', 'gitbox', 'home/.ssh', 'home/.agent', 'home/.gnupg'])
      mkdirSync(join(cwd, name), { recursive: true });
    writeFileSync(join(cwd, 'other', 'secret.txt'), 'secret');
    writeFileSync(join(home, '.ssh', 'id_ed25519'), 'a private key');
    writeFileSync(join(home, '.agent', 'settings.json'), "the operator's settings\n");
    // A file only root may read, which the operator lets sandboxes see (as the system shows many such).
    const rootFile = join(cwd, 'root-only.txt');
    writeFileSync(rootFile, 'root only', { mode: 0o600 });
    const token = adminTokenFile(cwd);
    // Two local services: the sandbox's network lets it reach the first only.
    servers = await Promise.all([0, 1].map(() => tcpServer()));
    // Sockets where the host keeps them: a service's under /run, an ssh-agent's under /tmp, a gpg-agent's in HOME, an abstract one.
    const abstract = `hrw-probe-${process.pid}-${variant}`;
    sockets = await Promise.all(
      [`/run/hrw-probe-${process.pid}-${variant}.sock`, join(cwd, `ssh-${variant}.sock`), join(home, '.gnupg', 'S.gpg-agent'), `\0${abstract}`].map(unixServer),
    );
    const env = {
      ALLOWED_PORT: String(servers[0]!.port),
      OTHER_PORT: String(servers[1]!.port),
      TOKEN_FILE: token,
      STORE: join(cwd, '.headless', 'headless.sqlite'),
      CONFIG: join(cwd, 'headless.config.json'),
      OTHER: join(cwd, 'other'),
      OUTSIDE: join(cwd, 'outside'),
      RUN_SOCKET: sockets[0]!.path,
      TMP_SOCKET: sockets[1]!.path,
      ABSTRACT_SOCKET: abstract,
      HOME: home,
      ROOT_FILE: rootFile,
      SENTINEL,
    };
    const workspace = (id: string, extra: Record<string, unknown> = {}) => ({ id, path: id, agents: ['probe', 'fake'], env, ...extra });
    // The probe keeps its state in ~/.agent; its settings and hooks there are configuration.
    // Only its sessions are state (an allow list): anything else it writes in ~/.agent is gone at the next run.
    const probeAgent = { command: '/bin/sh', args: [PROBE], stdin: '{prompt}', state: ['.agent/sessions'], config: ['.agent/settings.json', '.agent/hooks'] };
    writeConfig(cwd, {
      localCallers: 'token',
      // The probe and the fake agent are scripts outside the view: the operator lets sandboxes read them.
      sandbox: { readable: [PROBE, FAKE_AGENT, rootFile] },
      agents: { probe: probeAgent, fake: fakeAgent },
      workspaces: [
        workspace('open'),
        workspace('box', { run: { sandbox: true }, network: [`127.0.0.1:${servers[0]!.port}`] }),
        workspace('boxro', { run: { sandbox: true, permissions: 'read-only' } }),
        workspace('other'),
        // Root's own folder, never handed to the sandbox's user.
        workspace('rootbox', { run: { sandbox: true } }),
        // A repository used in place: its git folder is obeyed outside the sandbox.
        workspace('gitbox', { run: { sandbox: true } }),
      ],
    });
    const as: { uid?: number; gid?: number } = variant === 'user' && isRoot ? escapeUser() : {};
    if (as.uid !== undefined) spawnSync('chown', ['-R', `${as.uid}:${as.gid}`, cwd]);
    // Root's file stays root's; under a root daemon the operator hands the sandboxed workspace to the sandbox's user.
    if (isRoot) spawnSync('chown', ['root:root', rootFile]);
    const git = (...args: string[]) => spawnSync('git', ['-C', join(cwd, 'gitbox'), ...args], { encoding: 'utf8' });
    git('init', '--quiet', '--initial-branch', 'main');
    writeFileSync(join(cwd, 'gitbox', 'tracked.txt'), 'before\n');
    git('add', 'tracked.txt');
    git('-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '--quiet', '-m', 'first');
    if (as.uid !== undefined) spawnSync('chown', ['-R', `${as.uid}:${as.gid}`, join(cwd, 'gitbox')]);
    if (variant === 'root') for (const name of ['box', 'gitbox']) spawnSync('chown', ['-R', SANDBOX_USER, join(cwd, name)]);
    // The sentinel stands for any secret left in the daemon's environment.
    daemon = await startDaemon(cwd, ['--port', '0', '--admin-token-file', token], { HEADLESS_ADMIN_TOKEN: SENTINEL, HOME: home }, as);
  }, 600_000);
  afterAll(async () => {
    await daemon?.stop();
    for (const server of [...servers, ...sockets]) server.close();
  });

  it('unconfined, the probe reaches all of it: each check below can fail', async () => {
    await probe(daemon, 'open');
    // The second run finds what the first planted and kept.
    const { reach, record } = await probe(daemon, 'open');
    expect(Object.keys(reach).length).toBe(32);
    // What it writes is the daemon's user's: root's, under a root daemon.
    expect(statSync(join(cwd, 'open', 'owner-mark')).uid).toBe(variant === 'root' ? 0 : daemonUid());
    expect(
      Object.keys(reach)
        .filter((check) => reach[check] === 'no')
        .sort(),
    ).toEqual(unconfinedNo(variant).sort());
    expect(record.policy).toBeUndefined();
    // What it wrote is removed, so the sandboxed runs are judged by what they write.
    for (const file of [
      join(cwd, 'other', 'written.txt'),
      join(cwd, 'outside', 'written.txt'),
      join(home, '.agent', 'hooks'),
      join(home, '.agent', 'sessions'),
      join(home, '.agent', '.env'),
    ]) {
      rmSync(file, { recursive: true });
    }
    writeFileSync(join(home, '.agent', 'settings.json'), "the operator's settings\n");
  });

  it('sees its own workspace, a private temporary folder and its agent state, never the token, the store, the config, another workspace, HOME, a socket or the daemon', async () => {
    const first = await probe(daemon, 'box');
    expect(first.reach).toMatchObject({ planted: 'no', kept: 'no' });
    const { reach, record } = await probe(daemon, 'box');
    expect(reach).toEqual({
      token: 'no',
      store: 'no',
      config: 'no',
      'other-read': 'no',
      'other-write': 'no',
      'outside-write': 'no',
      'own-write': 'yes',
      'tmp-write': 'yes',
      'daemon-env': 'no',
      'daemon-process': 'no',
      'net-allowed': 'yes',
      'net-other': 'no',
      service: 'yes',
      // Its HTTPS_PROXY tunnels to what is allowed only.
      'proxy-allowed': 'yes',
      'proxy-other': 'no',
      // No capability, whoever started it; no privilege to gain; no other run's folder; no socket of the host's services.
      'has-caps': 'no',
      'new-privs': 'no',
      'other-runs': 'no',
      'run-socket': 'no',
      // A HOME of its own: no ssh key; no password hashes.
      'home-key': 'no',
      'etc-shadow': 'no',
      // The operator's agent configuration is read-only; a hook it planted is gone at the next run; its sessions are kept.
      'config-write': 'no',
      planted: 'no',
      'planted-env': 'no',
      kept: 'yes',
      'tmp-socket': 'no',
      'home-socket': 'no',
      'abstract-socket': 'no',
      sockets: 'no',
      userns: 'no',
      // Never host root: root's files and the kernel's knobs are out of reach, under a root daemon too.
      'root-file': 'no',
      'proc-sys': 'no',
    });
    expect(record).toMatchObject({ status: 'succeeded', policy: { permissions: 'full', sandbox: true } });
    // Never host root: a root daemon's agent writes as the sandbox's user.
    expect(statSync(join(cwd, 'box', 'owner-mark')).uid).toBe(variant === 'root' ? Number(SANDBOX_USER.split(':')[0]) : daemonUid());
    expect(existsSync(join(cwd, 'outside', 'written.txt'))).toBe(false);
    expect(existsSync(join(cwd, 'other', 'written.txt'))).toBe(false);
    // Nothing reached the operator's HOME; the workspace's agent state is in the data directory.
    expect(readFileSync(join(home, '.agent', 'settings.json'), 'utf8')).toBe("the operator's settings\n");
    expect(existsSync(join(home, '.agent', 'hooks'))).toBe(false);
    expect(existsSync(join(cwd, '.headless', 'agent-state', 'box', '.agent', 'sessions', 'kept'))).toBe(true);
  });

  it.skipIf(variant !== 'root')('under a root daemon, a workspace folder not handed to the sandbox user is refused, saying how', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/rootbox/headless', { prompt: 'x', agent: 'probe', wait: true }, auth);
    const body = (await res.json()) as { code: string; detail: string };
    expect(res.status, JSON.stringify(body)).toBe(500);
    expect(body.code).toBe('spawn_failed');
    expect(body.detail).toContain(`chown -R ${SANDBOX_USER} ${join(cwd, 'rootbox')}`);
  });

  it("in a repository used in place, its git folder is read-only: no config, hook or ref the service's git or a later run would obey", async () => {
    const steps = [
      'sh git config core.fsmonitor /tmp/evil || echo config-refused',
      'sh echo evil > .git/hooks/post-checkout || echo hook-refused',
      'sh git update-ref refs/heads/main HEAD~0 2>/dev/null && git commit --allow-empty -m x 2>/dev/null || echo commit-refused',
      'sh echo after > tracked.txt && echo tree-written',
    ];
    const res = await api(daemon, 'POST', '/api/workspaces/gitbox/headless', { prompt: steps.join('; '), agent: 'fake', wait: true }, auth);
    const record = (await res.json()) as { status: string; output: { stdout: string } };
    expect(record.status, JSON.stringify(record)).toBe('succeeded');
    for (const said of ['config-refused', 'hook-refused', 'commit-refused', 'tree-written']) expect(record.output.stdout).toContain(said);
    const config = readFileSync(join(cwd, 'gitbox', '.git', 'config'), 'utf8');
    expect(config).not.toContain('fsmonitor');
    expect(existsSync(join(cwd, 'gitbox', '.git', 'hooks', 'post-checkout'))).toBe(false);
    expect(readFileSync(join(cwd, 'gitbox', 'tracked.txt'), 'utf8')).toBe('after\n');
  });

  it('cancel stops the whole sandbox: the agent, its grandchild, the network bridge and bubblewrap', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/box/headless', { prompt: 'grandchild 60000; sleep 60000', agent: 'fake' }, auth);
    const { taskId } = (await res.json()) as { taskId: string };
    // bubblewrap (outside and as the sandbox's init), the bridge, the agent and its grandchild all carry the run's marker.
    await waitFor(() => markedCount([taskId]) >= 5, { what: 'the sandboxed agent and its grandchild' });
    expect((await api(daemon, 'POST', `/api/headless/${taskId}/cancel`, undefined, auth)).status).toBe(202);
    const status = async () => ((await (await api(daemon, 'GET', `/api/headless/${taskId}`, undefined, auth)).json()) as { status: string }).status;
    await waitFor(async () => (await status()) === 'cancelled', { what: 'the run to be cancelled' });
    expect(await noneMarked([taskId])).toBe(true);
  });

  it('read-only: its own workspace is read-only too, whatever the agent does; with no network listed, only the service', async () => {
    const { reach, record } = await probe(daemon, 'boxro');
    expect(reach).toMatchObject({
      'own-write': 'no',
      'outside-write': 'no',
      token: 'no',
      'tmp-write': 'yes',
      'net-allowed': 'no',
      service: 'yes',
      'has-caps': 'no',
      'home-key': 'no',
      'config-write': 'no',
      'root-file': 'no',
      'proc-sys': 'no',
    });
    expect(record.policy).toEqual({ permissions: 'read-only', sandbox: true });
  });
});

describe('sandbox settings', () => {
  it('an agent with no read-only mode of its own is refused on a read-only workspace without a sandbox', async () => {
    const cwd2 = dir();
    writeConfig(cwd2, {
      agents: { probe: { command: '/bin/sh', args: [PROBE], stdin: '{prompt}' } },
      workspaces: [{ id: 'ro', path: '.', agents: ['probe'], run: { permissions: 'read-only' } }],
    });
    const plain = await startDaemon(cwd2, ['--port', '0']);
    const res = await api(plain, 'POST', '/api/workspaces/ro/headless', { prompt: 'x', agent: 'probe', wait: true });
    const body = (await res.json()) as Record<string, any>;
    expect([res.status, body.code]).toEqual([500, 'spawn_failed']);
    expect(body.detail).toContain('probe has no read-only mode of its own');
    // doctor says so before any run is tried.
    const agents = (await (await api(plain, 'GET', '/api/agents?wsId=ro')).json()) as { workspaces: Array<{ agents: Array<Record<string, any>> }> };
    expect(agents.workspaces[0]!.agents.find((a) => a.agent === 'probe')).toMatchObject({
      canRun: false,
      problems: [expect.stringContaining('no read-only mode of its own, and this workspace is read-only without a sandbox')],
    });
    await plain.stop();
  });
  it.skipIf(!hasBwrap)('warns at start that sandboxed agents with the host network are local callers unless localCallers is "token"', async () => {
    const cwd = dir();
    writeConfig(cwd, { workspaces: [{ id: 'ws', path: '.', run: { sandbox: true }, network: ['*'] }] });
    const daemon = await startDaemon(cwd, ['--port', '0']);
    expect(daemon.output()).toMatch(/"level":40,.*sandboxed agents of workspace \\"ws\\" have the host's network/);
    await daemon.stop();
  });

  it.skipIf(!hasBwrap)('a sandboxed agent is no local caller, trusted local callers or not: it cannot start an unconfined run', async () => {
    const cwd = dir();
    mkdirSync(join(cwd, 'box'));
    if (isRoot) spawnSync('chown', ['-R', SANDBOX_USER, join(cwd, 'box')]);
    // The default localCallers ("trusted"): the test itself, a local process, starts runs without a token.
    writeConfig(cwd, {
      sandbox: { readable: [FAKE_AGENT] },
      agents: { fake: fakeAgent },
      workspaces: [
        { id: 'box', path: 'box', agents: ['fake'], run: { sandbox: true } },
        { id: 'open', path: '.', agents: ['fake'] },
      ],
    });
    const daemon = await startDaemon(cwd, ['--port', '0']);
    expect(daemon.output()).not.toMatch(/have the host's network/);
    const start = `fetch(process.env.HEADLESS_API_URL + '/api/workspaces/open/headless', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"prompt":"echo laundered"}' }).then((r) => console.log('start-status', r.status))`;
    const res = await api(daemon, 'POST', '/api/workspaces/box/headless', { prompt: `sh node -e "${start.replaceAll('"', '\\"')}"`, wait: true });
    const record = (await res.json()) as { output: { stdout: string } };
    expect(record.output.stdout, JSON.stringify(record)).toContain('start-status 401');
    // The same call from outside every sandbox is a trusted local caller's.
    expect((await api(daemon, 'POST', '/api/workspaces/open/headless', { prompt: 'echo outside' })).status).toBe(202);
    await daemon.stop();
  });

  it('a schedule asks for a sandbox where bwrap is not on the PATH: the daemon refuses to start, saying how to install it', async () => {
    const cwd = dir();
    writeConfig(cwd, { schedules: [{ name: 'nightly', cron: '0 3 * * *', workspace: 'default', prompt: 'x', run: { sandbox: true } }] });
    const r = await runCli(['serve', '--port', '0'], { cwd, env: { PATH: join(cwd, 'no-bin') } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('schedule "nightly" asks for a sandbox, but the sandbox needs bubblewrap, which is not installed: apt-get install bubblewrap');
  });

  it('bubblewrap cannot make the sandbox (no user namespaces): the daemon refuses to start, saying why, never runs a weaker one', async () => {
    const cwd = dir();
    mkdirSync(join(cwd, 'bin'));
    // What bubblewrap says where user namespaces are off (a sysctl, or Ubuntu's AppArmor rule).
    writeFileSync(join(cwd, 'bin', 'bwrap'), '#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n', { mode: 0o755 });
    writeConfig(cwd, { workspaces: [{ id: 'ws', path: '.', run: { sandbox: true } }] });
    const r = await runCli(['serve', '--port', '0'], { cwd, env: { PATH: `${join(cwd, 'bin')}:/usr/bin:/bin` } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('workspace "ws" asks for a sandbox, but bubblewrap cannot make a sandbox here (bwrap: setting up uid map: Permission denied)');
    expect(r.stderr).toContain('user namespaces');
  });

  it('a bad permissions value is a config error naming it', async () => {
    const cwd = dir();
    writeConfig(cwd, { workspaces: [{ id: 'ws', path: '.', run: { permissions: 'none' } }] });
    const r = await runCli(['serve', '--port', '0'], { cwd });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('"workspaces[0].run.permissions" is invalid: expected ("full" | "ask" | "read-only")');
  });

  it('a sandbox user that is root, or not "uid:gid", is a config error naming it', async () => {
    for (const user of ['0:0', '1000', 'nobody']) {
      const cwd = dir();
      writeConfig(cwd, { sandbox: { user } });
      const r = await runCli(['serve', '--port', '0'], { cwd });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/sandbox\.user.*must be "uid:gid", neither of them 0/);
    }
  });
});
