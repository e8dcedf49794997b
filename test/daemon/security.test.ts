import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, adminTokenFile, api, daemonDirs, runCli, startDaemon, writeConfig } from '../helpers/daemon';

/** docs/security.md: the admin token from a file, its strength, and what the daemon warns about at start. */

const dir = daemonDirs();

/** A run that prints its parent's (the daemon's) environment, as any agent of the same user could. */
const PEEK = { command: '/bin/sh', args: ['-c', 'tr "\\000" "\\n" < /proc/$PPID/environ; : {prompt}'] };

const peek = async (daemon: Awaited<ReturnType<typeof startDaemon>>) => {
  const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'x', agent: 'peek', wait: true }, { authorization: `Bearer ${ADMIN_TOKEN}` });
  return ((await res.json()) as { output: { stdout: string } }).output.stdout;
};

describe('the admin token', () => {
  it('from --admin-token-file: callers need it, and an agent reading the daemon’s environment does not find it', async () => {
    const cwd = dir();
    writeConfig(cwd, { agents: { peek: PEEK }, workspaces: [{ id: 'ws', path: '.', agents: ['peek'] }] });
    const daemon = await startDaemon(cwd, ['--port', '0', '--admin-token-file', adminTokenFile(cwd)], { HEADLESS_ADMIN_TOKEN: '' });
    expect(daemon.output()).not.toContain('"level":40');
    const seen = await peek(daemon);
    expect(seen).toContain('PATH=');
    expect(seen).not.toContain(ADMIN_TOKEN);
    await daemon.stop();
  });

  it('from HEADLESS_ADMIN_TOKEN: it works, with a warning at start that agents can read it (and they can)', async () => {
    const cwd = dir();
    writeConfig(cwd, { agents: { peek: PEEK }, workspaces: [{ id: 'ws', path: '.', agents: ['peek'] }] });
    const daemon = await startDaemon(cwd, ['--port', '0'], { HEADLESS_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(daemon.output()).toMatch(/"level":40,.*"msg":"the admin token is in the environment, which agents running as this user can read/);
    expect(await peek(daemon)).toContain(ADMIN_TOKEN);
    await daemon.stop();
  });

  it('from systemd’s credentials directory', async () => {
    const cwd = dir();
    const credentials = join(cwd, 'credentials');
    mkdirSync(credentials);
    writeFileSync(join(credentials, 'headless-admin-token'), ADMIN_TOKEN, { mode: 0o400 });
    const daemon = await startDaemon(cwd, ['--host', '0.0.0.0', '--port', '0'], { CREDENTIALS_DIRECTORY: credentials, HEADLESS_ADMIN_TOKEN: '' });
    const remote = `http://127.0.0.1:${daemon.port}/api/headless?wsId=default`;
    // From loopback with a forwarding header: not local, so the token decides.
    expect((await fetch(remote, { headers: { 'x-forwarded-for': '203.0.113.9' } })).status).toBe(401);
    expect((await fetch(remote, { headers: { 'x-forwarded-for': '203.0.113.9', authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(200);
    await daemon.stop();
  });

  it('is refused when short, when its file others can read, or empty; each saying what to do', async () => {
    const cwd = dir();
    const short = await runCli(['serve', '--port', '0'], { cwd, env: { HEADLESS_ADMIN_TOKEN: 'hunter2' } });
    expect([short.code, short.stderr]).toEqual([
      2,
      expect.stringContaining('the admin token must be at least 32 characters (it has 7); make one with: openssl rand -base64 32'),
    ]);
    const open = await runCli(['serve', '--port', '0', '--admin-token-file', adminTokenFile(cwd, 0o644)], { cwd });
    expect([open.code, open.stderr]).toEqual([2, expect.stringContaining('can be read by others: chmod 600')]);
    writeFileSync(join(cwd, 'empty'), '\n', { mode: 0o600 });
    expect((await runCli(['serve', '--port', '0', '--admin-token-file', join(cwd, 'empty')], { cwd })).stderr).toContain('is empty');
    expect((await runCli(['serve', '--port', '0', '--admin-token-file', join(cwd, 'nope')], { cwd })).stderr).toContain('ENOENT');
  });
});

describe('local callers', () => {
  it('"localCallers": "token": a loopback caller needs the token too; without a token the daemon refuses to start', async () => {
    const cwd = dir();
    writeConfig(cwd, { localCallers: 'token' });
    expect((await runCli(['serve', '--port', '0'], { cwd, env: { HEADLESS_ADMIN_TOKEN: '' } })).stderr).toContain('nobody could call');
    const daemon = await startDaemon(cwd, ['--port', '0', '--admin-token-file', adminTokenFile(cwd)], { HEADLESS_ADMIN_TOKEN: '' });
    expect((await api(daemon, 'GET', '/api/headless?wsId=ws')).status).toBe(401);
    expect((await api(daemon, 'GET', '/api/headless?wsId=ws', undefined, { authorization: `Bearer ${ADMIN_TOKEN}` })).status).toBe(200);
    // The probes stay open.
    expect((await api(daemon, 'GET', '/healthz')).status).toBe(200);
    await daemon.stop();
  });

  it('warns at start when publicHosts says a proxy forwards to a loopback daemon that trusts local callers', async () => {
    const cwd = dir();
    writeConfig(cwd, { publicHosts: ['agents.example.com'] });
    const daemon = await startDaemon(cwd, ['--port', '0'], { HEADLESS_ADMIN_TOKEN: '' });
    expect(daemon.output()).toMatch(/"level":40,.*"msg":"publicHosts is set, so a proxy on this host forwards to this loopback address/);
    await daemon.stop();
  });
});

describe('the config file', () => {
  it('is refused when others can write to it, when it is another user’s, or when found in a folder others can write to', async () => {
    const cwd = dir();
    const file = writeConfig(cwd);
    chmodSync(file, 0o666);
    const writable = await runCli(['serve', '--port', '0'], { cwd });
    expect([writable.code, writable.stderr]).toEqual([
      2,
      expect.stringContaining(`others can write to it (chmod go-w ${file}); its agents' commands would run as you`),
    ]);
    chmodSync(file, 0o644);
    if (process.getuid?.() === 0) {
      chownSync(file, 65534, 65534);
      expect((await runCli(['serve', '--port', '0'], { cwd })).stderr).toContain('it belongs to another user (uid 65534)');
      chownSync(file, 0, 0);
    }
    chmodSync(cwd, 0o1777);
    const shared = await runCli(['serve', '--port', '0'], { cwd });
    expect(shared.stderr).toContain('it was found in a folder others can write to (pass --config to name it)');
    // Named explicitly, a file of this user that no one else can write is read.
    const daemon = await startDaemon(cwd, ['--port', '0', '--config', file]);
    expect((await api(daemon, 'GET', '/api/headless?wsId=ws')).status).toBe(200);
    await daemon.stop();
    chmodSync(cwd, 0o700);
  });
});

describe('what runs inherit', () => {
  it('"inheritEnv": [names]: only those, the basics and the agents’ credential variables; the workspace env on top', async () => {
    const cwd = dir();
    writeConfig(cwd, { inheritEnv: ['MY_TOOL_*', 'ALLOWED'], workspaces: [{ id: 'ws', path: '.', agents: ['fake'], env: { FROM_WORKSPACE: 'w' } }] });
    const env = { DATABASE_URL: 'postgres://u:pw@db/x', ALLOWED: 'a', MY_TOOL_HOME: '/t', ANTHROPIC_API_KEY: 'k', LC_ALL: 'C' };
    const daemon = await startDaemon(cwd, ['--port', '0'], env);
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'dump-env', agent: 'fake', wait: true });
    const seen = JSON.parse(((await res.json()) as { output: { stdout: string } }).output.stdout.split('\n')[0]!) as Record<string, string>;
    expect(seen).toMatchObject({ ALLOWED: 'a', MY_TOOL_HOME: '/t', ANTHROPIC_API_KEY: 'k', LC_ALL: 'C', FROM_WORKSPACE: 'w' });
    expect(seen.PATH).toBeTruthy();
    expect(seen).not.toHaveProperty('DATABASE_URL');
    await daemon.stop();
  });
});

describe('prompts out of the process list', () => {
  it('a custom agent with "stdin": "{prompt}" gets its prompt on stdin, never in its argv', async () => {
    const cwd = dir();
    const echo = { command: '/bin/sh', args: ['-c', 'cat; echo; tr "\\000" " " < /proc/$$/cmdline', 'echo-agent'], stdin: 'PROMPT {prompt}' };
    writeConfig(cwd, { agents: { echo }, workspaces: [{ id: 'ws', path: '.', agents: ['echo'] }] });
    const daemon = await startDaemon(cwd);
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'the-secret-plan', wait: true });
    const [stdin, argv] = ((await res.json()) as { output: { stdout: string } }).output.stdout.split('\n');
    expect(stdin).toBe('PROMPT the-secret-plan');
    expect(argv).toContain('/bin/sh -c');
    expect(argv).not.toContain('the-secret-plan');
    await daemon.stop();
  });
});
