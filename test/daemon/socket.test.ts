import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adminTokenFile, api, daemonDirs, runCli, startDaemon, writeConfig } from '../helpers/daemon';

/** docs/security.md, A socket: `serve --socket`, whose file mode decides who is a local caller. */

const dir = daemonDirs();

const curl = (socket: string, path: string, uid?: number) =>
  spawnSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--unix-socket', socket, `http://localhost${path}`], { encoding: 'utf8', uid });

describe('serve --socket', () => {
  it('callers through the socket (0600) are local even when TCP needs the token; the CLI and the client speak to it; the file goes at stop', async () => {
    const cwd = dir();
    writeConfig(cwd, { localCallers: 'token' });
    const socket = join(cwd, 'headless.sock');
    const daemon = await startDaemon(cwd, ['--port', '0', '--socket', socket, '--admin-token-file', adminTokenFile(cwd)], { HEADLESS_ADMIN_TOKEN: '' });
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(curl(socket, '/api/headless?wsId=ws').stdout).toBe('200');
    expect((await api(daemon, 'GET', '/api/headless?wsId=ws')).status).toBe(401);
    const run = await runCli(['run', 'echo through-the-socket', '--agent', 'fake', '--workspace', 'ws', '--follow', '--url', `unix:${socket}`], {
      cwd,
      timeoutMs: 240_000,
    });
    expect([run.code, run.stdout]).toEqual([0, expect.stringMatching(/run\.ended +succeeded/)]);
    const listed = await runCli(['list', '--workspace', 'ws', '--json', '--url', `unix:${socket}`], { cwd });
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
    if (process.getuid?.() === 0) expect(curl(socket, '/api/headless?wsId=ws', 65534).stdout).toBe('000');
    await daemon.stop();
    expect(existsSync(socket)).toBe(false);
  });

  it('--socket-mode 660 lets the group in; a stale socket file is replaced, a live one refused; a bad mode is a usage error', async () => {
    const cwd = dir();
    const socket = join(cwd, 'headless.sock');
    const first = await startDaemon(cwd, ['--port', '0', '--socket', socket, '--socket-mode', '660']);
    expect(statSync(socket).mode & 0o777).toBe(0o660);
    const refused = await runCli(['serve', '--port', '0', '--socket', socket, '--data-dir', join(cwd, 'other')], { cwd });
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining('is the socket of a running process')]);
    await first.stop('SIGKILL');
    expect(existsSync(socket)).toBe(true);
    const next = await startDaemon(cwd, ['--port', '0', '--socket', socket]);
    expect(curl(socket, '/healthz').stdout).toBe('200');
    await next.stop();
    expect((await runCli(['serve', '--socket', socket, '--socket-mode', 'rw'], { cwd })).stderr).toContain('--socket-mode must be three octal digits');
  });
});
