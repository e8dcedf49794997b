import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach } from 'vitest';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { FAKE_AGENT } from './harness';
import { waitEnded } from './wait';

export const CLI = resolve(__dirname, '../../dist/cli.cjs');

export interface Daemon {
  url: string;
  port: number;
  dir: string;
  child: ChildProcess;
  /** What it printed, stdout and stderr together. */
  output(): string;
  /** What it printed on stdout alone. */
  stdout(): string;
  /** Sends a signal and waits for the exit code (bounded). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<ChildProcess>();

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'hrw-daemon-'));
}

/** A config with workspace `ws` (the fake agent enabled) in `dir`. */
export function writeConfig(dir: string, extra: Record<string, unknown> = {}): string {
  const file = join(dir, 'headless.config.json');
  writeFileSync(
    file,
    JSON.stringify({
      agents: {
        fake: { command: process.execPath, args: [FAKE_AGENT, '{prompt}'], resumeArgs: [FAKE_AGENT, '{prompt}'], sessionIdPattern: 'session=([A-Za-z0-9-]+)' },
      },
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'] }],
      ...extra,
    }),
  );
  return file;
}

/** Runs the CLI without waiting for it to listen; resolves with its exit code and output. */
export function runCli(
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    // A `serve` here is another daemon than any startDaemon gave this folder.
    const env = { ...process.env, HEADLESS_DATA_DIR: join(options.cwd, '.headless-cli'), ...options.env };
    const child = spawn(process.execPath, [CLI, ...args], { cwd: options.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 240_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      running.delete(child);
      done({ code, stdout, stderr });
    });
  });
}

/**
 * Starts `serve` (or, when `args` begin with it, `worker`) in `dir` and waits for its `listening on` line. Its store is `dir/.headless`
 * unless `--data-dir` or `HEADLESS_DATA_DIR` says otherwise: never the user's state folder.
 */
export function startDaemon(
  dir: string,
  args: string[] = ['--port', '0'],
  env: NodeJS.ProcessEnv = {},
  /** Another user to run it as (the test runs as root); `inherit`: a file it is started holding open as descriptor 3, as a careless parent leaves one. */
  as: { uid?: number; gid?: number; inherit?: string } = {},
): Promise<Daemon> {
  return new Promise((done, fail) => {
    const childEnv = { ...process.env, HEADLESS_DATA_DIR: join(dir, '.headless'), ...env };
    const { inherit, ...user } = as;
    const held = inherit === undefined ? [] : [openSync(inherit, 'r')];
    const child = spawn(process.execPath, [CLI, ...(args[0] === 'worker' ? args : ['serve', ...args])], {
      cwd: dir,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe', ...held],
      ...user,
    });
    for (const fd of held) closeSync(fd);
    running.add(child);
    let out = '';
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`daemon did not listen within 240 s:\n${out}`));
    }, 240_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+:(\d+))\n/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      done({
        url: match[1]!,
        port: Number(match[2]),
        dir,
        child,
        output: () => out,
        stdout: () => stdout,
        stop: (signal = 'SIGTERM') =>
          new Promise((stopped) => {
            if (child.exitCode !== null || child.signalCode !== null) return stopped(child.exitCode);
            const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
            child.once('exit', (code) => {
              clearTimeout(kill);
              running.delete(child);
              stopped(code);
            });
            child.kill(signal);
          }),
      });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      running.delete(child);
      fail(new Error(`daemon exited (${code}) before listening:\n${out}`));
    });
  });
}

/**
 * A test file's temporary folders: each call makes one; after each test, every daemon is killed
 * and the folders are removed.
 */
export function daemonDirs(): () => string {
  const dirs: string[] = [];
  afterEach(() => cleanupDaemons(dirs));
  return () => {
    const d = tempDir();
    dirs.push(d);
    return d;
  };
}

/** An admin token of 40 characters, in a 0600 file in `dir`. */
export const ADMIN_TOKEN = 'a-token-of-forty-characters-0123456789ab';
export function adminTokenFile(dir: string, mode = 0o600): string {
  const file = join(dir, 'admin-token');
  writeFileSync(file, `${ADMIN_TOKEN}\n`);
  chmodSync(file, mode);
  return file;
}

/** Kills every daemon a test file started and removes `dirs`. */
export function cleanupDaemons(dirs: string[] = []): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export async function api(daemon: Daemon, method: string, path: string, json?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const send = () =>
    fetch(`${daemon.url}${path}`, {
      method,
      headers: json === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
  try {
    return await send();
  } catch (error) {
    // A kept-alive socket the daemon closed as idle just as this request went out on it (a busy
    // machine widens that moment): the daemon never read the request, so it is sent again, once.
    if ((error as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw error;
    return send();
  }
}

/** Polls a run on the daemon until it has ended, and returns its record. */
export const waitRun = (daemon: Daemon, taskId: string, timeoutMs = 60_000) =>
  waitEnded(async () => (await (await api(daemon, 'GET', `/api/headless/${taskId}`)).json()) as Record<string, any>, timeoutMs);

/** A daemon serving the fake-agent config (`writeConfig`) in a new temp dir, which joins `dirs` for cleanup. */
export async function startFakeDaemon(dirs: string[]): Promise<Daemon> {
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir);
  return startDaemon(dir);
}
