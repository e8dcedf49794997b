import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  type CommandAgentDefinition,
  type HeadlessHandler,
  type HeadlessHandlerOptions,
  type Spawner,
  createExecaSpawner,
  createHeadlessHandler,
} from '../../src/core/index';
import { waitEnded } from './wait';

export const FAKE_AGENT = resolve(__dirname, '../fixtures/fake-agent.mjs');

/** A config-style agent running the fake agent; its prompt picks its behaviour. */
export const fakeAgent: CommandAgentDefinition = {
  command: process.execPath,
  args: [FAKE_AGENT, '{prompt}'],
  resumeArgs: [FAKE_AGENT, '{prompt}'],
  sessionIdPattern: 'session=([A-Za-z0-9-]+)',
};

/** The real spawner, counting the processes it started. */
export function countingSpawner(inner: Spawner = createExecaSpawner()): Spawner & { count: number } {
  const spawner = Object.assign(
    async (options: Parameters<Spawner>[0]) => {
      spawner.count += 1;
      return inner(options);
    },
    { count: 0 },
  );
  return spawner;
}

export interface RequestOptions {
  json?: unknown;
  body?: string;
  headers?: Record<string, string>;
  /** The peer address; default loopback. */
  remote?: string;
}

export interface TestHost {
  handler: HeadlessHandler;
  spawner: Spawner & { count: number };
  dir: string;
  request(method: string, path: string, options?: RequestOptions): Promise<Response>;
  /** Starts an async run of the fake agent and returns its taskId. */
  start(prompt: string, extra?: Record<string, unknown>): Promise<{ taskId: string; resumeId: string }>;
  /** Polls until the run has ended, bounded. */
  waitEnded(taskId: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

const hosts = new Set<TestHost>();

export const SILENT = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A logger that keeps what it is told, to check the lines a unit logs. */
export function memoryLogger() {
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => lines.push({ level, message, fields });
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error') } };
}

/** An in-process handler with one workspace `ws` (fake agent enabled) in a temp dir. */
export async function createTestHost(options: Partial<HeadlessHandlerOptions> = {}): Promise<TestHost> {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-'));
  const spawner = countingSpawner(options.spawner);
  let handler: HeadlessHandler;
  try {
    handler = createHeadlessHandler({
      workspaces: [
        { id: 'ws', path: dir, agents: ['fake', 'claude', 'shell', 'util'] },
        { id: 'other', path: dir, agents: ['fake'] },
      ],
      agents: { fake: fakeAgent, util: { ...fakeAgent, kind: 'utility' } },
      logger: SILENT,
      ...options,
      spawner,
    });
    await handler.ready;
  } catch (error) {
    // Options the handler refuses (the tests of bad settings) leave no folder behind.
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  const request = (method: string, path: string, o: RequestOptions = {}) => {
    const headers: Record<string, string> = { host: 'localhost:47331', ...o.headers };
    let body: string | undefined = o.body;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers['content-type'] ??= 'application/json';
    }
    return Promise.resolve(
      handler.fetch(`http://localhost:47331${path}`, { method, headers, body }, { remoteAddress: o.remote ?? '127.0.0.1', localAddress: '127.0.0.1' }),
    );
  };

  const host: TestHost = {
    handler,
    spawner,
    dir,
    request,
    async start(prompt, extra = {}) {
      const res = await request('POST', '/api/workspaces/ws/headless', { json: { prompt, agent: 'fake', ...extra } });
      if (res.status !== 202) throw new Error(`start failed: ${res.status} ${await res.text()}`);
      return (await res.json()) as { taskId: string; resumeId: string };
    },
    waitEnded: (taskId, timeoutMs) =>
      waitEnded(async () => (await (await request('GET', `/api/headless/${taskId}`)).json()) as Record<string, unknown>, timeoutMs),
    async close() {
      hosts.delete(host);
      await handler.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  hosts.add(host);
  return host;
}

/** Closes every host a test file left open (stops their runs). */
export async function closeAllHosts(): Promise<void> {
  await Promise.all([...hosts].map((h) => h.close()));
}

export async function problem(res: Response): Promise<{ status: number; code: string; type: string; contentType: string | null }> {
  const body = (await res.json()) as { code: string; type: string };
  return { status: res.status, code: body.code, type: body.type, contentType: res.headers.get('content-type') };
}
