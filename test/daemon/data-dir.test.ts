import { chmodSync, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, daemonDirs, runCli, startDaemon } from '../helpers/daemon';

/** docs/configuration.md, Data directory: outside the workspace, private, one daemon at a time. */

const dir = daemonDirs();

const mode = (file: string) => statSync(file).mode & 0o777;
/** The platform default: the state folder under a temporary XDG_STATE_HOME. */
const defaultEnv = (state: string) => ({ HEADLESS_DATA_DIR: '', HEADLESS_URL: '', XDG_STATE_HOME: state });
/** The one project folder made under the default state folder. */
const projectData = (state: string) => {
  const projects = join(state, 'headless-run-webhook', 'projects');
  const [only, ...more] = readdirSync(projects);
  expect(more).toEqual([]);
  return join(projects, only as string);
};

describe('the data directory', () => {
  it('defaults to the state folder, never the workspace; 0700, its files 0600; its daemon file gone after a stop', async () => {
    const cwd = dir();
    const state = join(dir(), 'state');
    const daemon = await startDaemon(cwd, ['--port', '0'], defaultEnv(state));
    expect((await api(daemon, 'POST', '/api/workspaces/default/inbox', { title: 'kept' })).status).toBe(201);
    const data = projectData(state);
    expect(data).toMatch(new RegExp(`/projects/${basename(cwd)}-[0-9a-f]{12}$`));
    expect(readdirSync(cwd)).toEqual([]);
    expect(mode(data)).toBe(0o700);
    const files = readdirSync(data);
    expect(files).toEqual(expect.arrayContaining(['headless.sqlite', 'daemon.json']));
    for (const file of files) expect([file, mode(join(data, file))]).toEqual([file, 0o600]);
    expect(await daemon.stop()).toBe(0);
    expect(readdirSync(data)).not.toContain('daemon.json');
  });

  it('local callers find the daemon of the data directory, on whatever port it got', async () => {
    const cwd = dir();
    const env = { HEADLESS_DATA_DIR: join(cwd, 'data'), HEADLESS_URL: '' };
    const daemon = await startDaemon(cwd, ['--port', '0'], env);
    expect((await api(daemon, 'POST', '/api/workspaces/default/inbox', { title: 'found it' })).status).toBe(201);
    const inbox = await runCli(['inbox'], { cwd, env });
    expect([inbox.code, inbox.stdout]).toEqual([0, expect.stringContaining('found it')]);
    await daemon.stop();
  });

  it('two projects started without a data directory keep apart: each its own store, its own "default"; a caller in a subfolder finds its project’s daemon', async () => {
    const state = join(dir(), 'state');
    const [a, b] = [dir(), dir()];
    const first = await startDaemon(a, ['--port', '0'], defaultEnv(state));
    expect((await api(first, 'POST', '/api/workspaces/default/inbox', { title: 'of project a' })).status).toBe(201);
    await first.stop();
    const second = await startDaemon(b, ['--port', '0'], defaultEnv(state));
    const inbox = (await (await api(second, 'GET', '/api/workspaces/default/inbox')).json()) as { items: unknown[] };
    expect(inbox.items).toEqual([]);
    mkdirSync(join(b, 'src', 'deep'), { recursive: true });
    const found = await runCli(['inbox', '--json'], { cwd: join(b, 'src', 'deep'), env: defaultEnv(state) });
    expect([found.code, found.stdout.trim()]).toEqual([0, '[]']);
    await second.stop();
  });

  it('--data-dir wins over HEADLESS_DATA_DIR, which wins over the default', async () => {
    const cwd = dir();
    const byEnv = await startDaemon(cwd, ['--port', '0'], { HEADLESS_DATA_DIR: 'from-env', XDG_STATE_HOME: join(cwd, 'state') });
    await byEnv.stop();
    const byFlag = await startDaemon(cwd, ['--port', '0', '--data-dir', 'from-flag'], { HEADLESS_DATA_DIR: 'from-env' });
    await byFlag.stop();
    expect(existsSync(join(cwd, 'from-env', 'headless.sqlite'))).toBe(true);
    expect(existsSync(join(cwd, 'from-flag', 'headless.sqlite'))).toBe(true);
    expect(existsSync(join(cwd, 'state'))).toBe(false);
  });

  it('moves the store an older version left in ./.headless, with a line saying so, and keeps what it held', async () => {
    const cwd = dir();
    const state = join(dir(), 'state');
    const old = await startDaemon(cwd, ['--port', '0', '--data-dir', '.headless']);
    expect((await api(old, 'POST', '/api/workspaces/default/inbox', { title: 'from before' })).status).toBe(201);
    await old.stop();
    const moved = await startDaemon(cwd, ['--port', '0'], defaultEnv(state));
    expect(moved.output()).toContain(`moved the store from ${join(cwd, '.headless')} to ${projectData(state)}`);
    expect(existsSync(join(cwd, '.headless'))).toBe(false);
    const inbox = (await (await api(moved, 'GET', '/api/workspaces/default/inbox')).json()) as { items: Array<{ title: string }> };
    expect(inbox.items.map((item) => item.title)).toEqual(['from before']);
    await moved.stop();
  });

  it('leaves an older store alone when the default folder already holds one, and says how to use it', async () => {
    const cwd = dir();
    const state = join(dir(), 'state');
    await (await startDaemon(cwd, ['--port', '0'], defaultEnv(state))).stop();
    await (await startDaemon(cwd, ['--port', '0', '--data-dir', '.headless'])).stop();
    const daemon = await startDaemon(cwd, ['--port', '0'], defaultEnv(state));
    expect(daemon.output()).toContain(`start with --data-dir ${join(cwd, '.headless')} to use it`);
    expect(existsSync(join(cwd, '.headless', 'headless.sqlite'))).toBe(true);
    await daemon.stop();
  });

  it('refuses a second daemon on the same folder, naming the first; after a kill -9 the next one starts', async () => {
    const cwd = dir();
    const first = await startDaemon(cwd, ['--port', '0', '--data-dir', 'data']);
    const second = await runCli(['serve', '--port', '0', '--data-dir', 'data'], { cwd });
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`is the data directory of the daemon with pid ${first.child.pid}`);
    expect(second.stdout).not.toContain('listening on');
    await first.stop('SIGKILL');
    const next = await startDaemon(cwd, ['--port', '0', '--data-dir', 'data']);
    expect((await api(next, 'GET', '/api/headless?wsId=default')).status).toBe(200);
    await next.stop();
  });

  it('makes store files an older version left readable by others private', async () => {
    const cwd = dir();
    await (await startDaemon(cwd, ['--port', '0', '--data-dir', 'data'])).stop();
    chmodSync(join(cwd, 'data', 'headless.sqlite'), 0o644);
    const daemon = await startDaemon(cwd, ['--port', '0', '--data-dir', 'data']);
    expect(mode(join(cwd, 'data', 'headless.sqlite'))).toBe(0o600);
    await daemon.stop();
  });
});
