import { spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { mockEnv, writeHome } from '../fixtures/mock-model/homes.mjs';
import { type MockModel, startMockModel } from '../fixtures/mock-model/server.mjs';
import { type Daemon, api, cleanupDaemons, startDaemon, waitRun } from './daemon';
import { type OtlpReceiver, startOtlpReceiver } from './otlp-receiver';

/**
 * The real-CLI tier's stage (test/daemon/real-agents*.test.ts): the real agent CLIs from the npm
 * registry (pinned dev dependencies), run through the real daemon against a local mock model
 * server, each workspace with a scratch HOME. Every failure mode is made fast by the mock (errors
 * marked not to be retried) or by the CLI's own retry settings. Each test file that calls
 * `realTier()` gets its own mock, daemon and folders.
 */

// HEADLESS_REAL_CLI_BIN: other builds of the CLIs (npm run test:latest-clis puts the newest there).
export const BIN = process.env.HEADLESS_REAL_CLI_BIN || resolve(__dirname, '../../node_modules/.bin');
export const REAL = ['claude', 'codex', 'gemini', 'qwen', 'opencode', 'copilot', 'goose', 'pi', 'cline'] as const;
/** The built-ins that also speak ACP, each through it (docs/agents.md: ACP). */
export const ACP = ['gemini-acp', 'qwen-acp', 'opencode-acp', 'goose-acp', 'copilot-acp', 'cline-acp'] as const;
export type Real = (typeof REAL)[number];

/** Workspaces, one per behaviour of the mock; `wipe` has a HOME the tests can wipe; `flaky` drops every other stream. */
export const MODES = {
  ok: 'mock-ok',
  e401: 'mock-401',
  e500: 'mock-500',
  nocreds: undefined,
  wipe: 'mock-ok',
  flaky: 'mock-flaky',
  box: 'mock-ok',
  ro: 'mock-ok',
  ask: 'mock-ok',
  askfast: 'mock-ok',
} as const;
/** `box` runs each CLI in a bubblewrap sandbox (where bwrap is installed); `ro` with its read-only flags. */
const POLICIES: Partial<Record<keyof typeof MODES, Record<string, unknown>>> = {
  box: { run: { sandbox: true } },
  ro: { run: { permissions: 'read-only' } },
  // docs/approvals.md: every question waits for a caller; `askfast`'s get their fallback after a second.
  ask: { run: { permissions: 'ask' } },
  askfast: { run: { permissions: 'ask', approvals: { timeoutMs: 1000 } } },
};
// In CI the sandboxed runs must run (npm test installs bubblewrap); elsewhere they need it installed.
export const hasBwrap = spawnSync('bwrap', ['--version']).status === 0 || Boolean(process.env.CI);
export type Mode = keyof typeof MODES;

/** What `realTier()` set up, once its `beforeAll` has run. */
export const tier = {} as {
  mock: MockModel;
  /** The daemon exports its traces here (docs/deployment.md: Traces). */
  otlp: OtlpReceiver;
  daemon: Daemon;
};
let root: string;
/** The PATH of every run: BIN, after a folder with the `goose` link (goose's npm package names its binary for its platform). */
let PATH: string;
export const homes = {} as Record<Mode, string>;
export const paths = {} as Record<Mode, string>;

/** Registers the file's set-up and tear-down: the mock model, the OTLP receiver, the daemon. */
export function realTier(): void {
  beforeAll(async () => {
    const mock = await startMockModel();
    tier.mock = mock;
    root = mkdtempSync(join(tmpdir(), 'hrw-real-'));
    mkdirSync(join(root, 'bin'));
    symlinkSync(join(BIN, 'goose-binary-linux-x64'), join(root, 'bin', 'goose'));
    PATH = [join(root, 'bin'), BIN, process.env.PATH].join(delimiter);
    const workspaces: Array<Record<string, unknown>> = (Object.keys(MODES) as Mode[]).map((mode) => {
      homes[mode] = join(root, `home-${mode}`);
      paths[mode] = join(root, `ws-${mode}`);
      mkdirSync(paths[mode]);
      // Under a root daemon a sandboxed workspace is the sandbox user's, as its operator makes it (docs/security.md).
      if ((POLICIES[mode]?.run as { sandbox?: boolean } | undefined)?.sandbox && process.getuid?.() === 0) chownSync(paths[mode], 65532, 65532);
      writeHome(homes[mode], mock.url);
      return {
        id: mode,
        path: paths[mode],
        agents: [...REAL, 'amp', ...ACP],
        env: { ...mockEnv(homes[mode], mock.url, MODES[mode]), PATH },
        ...(mode === 'box' && !hasBwrap ? {} : POLICIES[mode]),
        // In the sandbox, the network reaches the mock model (and the service) only.
        ...(mode === 'box' ? { network: [new URL(mock.url).host] } : {}),
      };
    });
    // No credentials and a HOME with no agent config at all.
    const bare = join(root, 'home-bare');
    mkdirSync(bare);
    workspaces.push({ id: 'bare', path: bare, agents: ['codex'], env: { HOME: bare, PATH } });
    const daemonDir = join(root, 'daemon');
    mkdirSync(daemonDir);
    const config = join(daemonDir, 'headless.config.json');
    writeFileSync(config, JSON.stringify({ maxConcurrentRuns: 4, workspaces }));
    // The daemon's own PWD is its folder: a run must never inherit it.
    tier.otlp = await startOtlpReceiver();
    tier.daemon = await startDaemon(daemonDir, ['--config', config, '--port', '0'], {
      PWD: daemonDir,
      OTEL_EXPORTER_OTLP_ENDPOINT: tier.otlp.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
  }, 600_000);

  afterAll(async () => {
    await tier.daemon?.stop();
    await tier.mock?.close();
    await tier.otlp?.close();
    cleanupDaemons();
    if (root) rmSync(root, { recursive: true, force: true });
  });
}

/** Starts a run in workspace `mode` and answers its final record. */
export async function run(mode: Mode, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await api(tier.daemon, 'POST', `/api/workspaces/${mode}/headless`, { timeoutMs: 600_000, ...body });
  const answer = (await res.json()) as Record<string, any>;
  if (body.wait) {
    expect(res.status, JSON.stringify(answer)).toBe(200);
    return answer;
  }
  expect(res.status, JSON.stringify(answer)).toBe(202);
  return waitRun(tier.daemon, answer.taskId, 600_000);
}

export const session = async (resumeId: string) => (await (await api(tier.daemon, 'GET', `/api/sessions/${resumeId}`)).json()) as Record<string, any>;
export const requestsSince = (count: number) => tier.mock.requests.slice(count).map((r) => JSON.stringify(r.body));
