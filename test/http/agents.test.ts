import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentAdapter, AgentRunInput } from '../../src/core/agents/types';
import { type TestHost, closeAllHosts, createTestHost, fakeAgent, problem } from '../helpers/harness';
import { faultyKeyv } from '../helpers/faulty-store';
import { waitFor } from '../helpers/wait';

const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const adapter = (name: string): AgentAdapter => BUILTIN_AGENTS.find((a) => a.name === name)!;
const PROMPT = '--help --yolo; $(id) `x` "q"';
const input = (extra: Partial<AgentRunInput> = {}): AgentRunInput => ({
  prompt: PROMPT,
  workspacePath: '/w',
  resumeId: 'ses_1',
  permissions: 'full',
  ...extra,
});

describe('built-in adapters build their CLI’s real headless command line', () => {
  const cases: Array<[string, string, string[], string[] | undefined]> = [
    ['claude', 'claude', ['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions'], ['--resume', 'S1']],
    ['codex', 'codex', ['exec', '--json', '--skip-git-repo-check', '--sandbox', 'workspace-write', '--color', 'never', '-'], undefined],
    ['gemini', 'gemini', ['--prompt=', '--output-format', 'stream-json', '--approval-mode', 'yolo', '--skip-trust'], ['--resume', 'S1']],
    ['qwen', 'qwen', ['--output-format', 'stream-json', '--approval-mode', 'yolo'], ['--resume', 'S1']],
    ['opencode', 'opencode', ['run', '--format', 'json'], ['--session', 'S1']],
    ['cursor', 'cursor-agent', ['-p', '--output-format', 'stream-json', '--force', '--trust'], ['--resume', 'S1']],
    ['amp', 'amp', ['--execute', '--stream-json', '--dangerously-allow-all'], undefined],
    ['copilot', 'copilot', ['--allow-all', '--no-ask-user', '--output-format', 'json'], ['--resume=S1']],
    ['pi', 'pi', ['-p', '--mode', 'json'], ['--session', 'S1']],
  ];

  it.each(cases)('%s', (name, command, args, resumeTail) => {
    const inv = adapter(name).invocation(input());
    expect(inv.command).toBe(command);
    expect(inv.args).toEqual(args);
    // The prompt is on stdin, or one `--prompt=` element: never an argv element of its own.
    expect(inv.args).not.toContain(PROMPT);
    if (inv.stdin === undefined) expect(inv.args.filter((a) => a.includes(PROMPT))).toEqual([`--prompt=${PROMPT}`]);
    else expect(inv.stdin).toBe(PROMPT);
    if (resumeTail) expect(adapter(name).invocation(input({ agentSessionId: 'S1' })).args).toEqual([...args, ...resumeTail]);
  });

  it('claude under permissions "ask": its prompt and its answers go on stdin, as stream-json; its questions come on stdout', () => {
    const inv = adapter('claude').invocation(input({ permissions: 'ask' }));
    expect(inv.args).toEqual([
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--input-format',
      'stream-json',
      '--permission-prompt-tool',
      'stdio',
      '--permission-mode',
      'default',
    ]);
    expect(inv.stdin).toBeUndefined();
    expect(inv.env).toBeUndefined();
  });

  it('codex resumes with every flag before `resume <thread_id>`', () => {
    expect(adapter('codex').invocation(input({ agentSessionId: 'T1' })).args).toEqual([
      'exec',
      '--json',
      '--skip-git-repo-check',
      '--sandbox',
      'workspace-write',
      '--color',
      'never',
      'resume',
      'T1',
      '-',
    ]);
  });

  it('codex in the service’s sandbox leaves confinement to it (its own cannot start there); read-only stays read-only', () => {
    const sandboxArg = (extra: Partial<AgentRunInput>) => {
      const args = adapter('codex').invocation(input(extra)).args;
      return args[args.indexOf('--sandbox') + 1];
    };
    expect(sandboxArg({ sandboxed: true })).toBe('danger-full-access');
    expect(sandboxArg({ sandboxed: true, permissions: 'read-only' })).toBe('read-only');
    expect(sandboxArg({ sandboxed: false })).toBe('workspace-write');
  });

  it('amp resumes with `threads continue <id>`', () => {
    expect(adapter('amp').invocation(input({ agentSessionId: 'T-1' })).args).toEqual([
      'threads',
      'continue',
      'T-1',
      '--execute',
      '--stream-json',
      '--dangerously-allow-all',
    ]);
  });

  it('goose names the session itself and resumes by that name', () => {
    const goose = adapter('goose');
    expect(goose.invocation(input()).args).toEqual(['run', '--name', 'headless-ses_1', '--output-format', 'stream-json', '--instructions', '-']);
    expect(goose.invocation(input({ agentSessionId: 'headless-ses_1' })).args).toEqual([
      'run',
      '--resume',
      '--name',
      'headless-ses_1',
      '--output-format',
      'stream-json',
      '--instructions',
      '-',
    ]);
    expect(goose.parser(input()).finish(0).agentSessionId).toBe('headless-ses_1');
  });

  it('the ACP twins: each in its ACP mode; under "ask" in the mode where it asks; copilot’s never asks, so it has no read-only or ask of its own', () => {
    const twin = (name: string, permissions: AgentRunInput['permissions']) => adapter(name).invocation(input({ permissions }));
    expect(twin('opencode-acp', 'ask')).toEqual({ command: 'opencode', args: ['acp'], env: { OPENCODE_PERMISSION: '{"*":"ask"}' } });
    expect(twin('opencode-acp', 'full').env).toEqual({ OPENCODE_PERMISSION: '{"*":"allow"}' });
    expect(twin('goose-acp', 'ask')).toEqual({ command: 'goose', args: ['acp'], env: { GOOSE_MODE: 'approve' } });
    expect(twin('goose-acp', 'read-only').env).toEqual({ GOOSE_MODE: 'chat' });
    expect(twin('gemini-acp', 'ask')).toEqual({ command: 'gemini', args: ['--acp'] });
    expect(twin('copilot-acp', 'full')).toEqual({ command: 'copilot', args: ['--acp'] });
    expect(adapter('copilot-acp')).toMatchObject({ readOnly: false, protocol: { asks: false } });
    expect(adapter('gemini-acp')).toMatchObject({ readOnly: true, protocol: { asks: true } });
    const local = { CLINE_SESSION_BACKEND_MODE: 'local' };
    expect(twin('cline-acp', 'full')).toEqual({ command: 'cline', args: ['--acp'], env: local });
    for (const permissions of ['ask', 'read-only'] as const)
      expect(twin('cline-acp', permissions)).toEqual({ command: 'cline', args: ['--acp', '--auto-approve', 'false'], env: local });
  });

  it('every built-in but cline keeps the prompt out of its arguments, which any local user can read (docs/security.md)', () => {
    for (const a of BUILTIN_AGENTS.filter((b) => b.kind === 'agent' && b.name !== 'cline')) {
      for (const permissions of ['full', 'read-only', 'ask'] as const) {
        expect(
          a.invocation(input({ permissions })).args.some((arg) => arg.includes(PROMPT)),
          `${a.name} ${permissions}`,
        ).toBe(false);
      }
    }
  });

  it('cline: its prompt is the one argument after `--`, ending in whitespace so that one word is neither refused nor run as its subcommand', () => {
    const cline = adapter('cline');
    expect(cline.invocation(input())).toEqual({
      command: 'cline',
      args: ['--json', '--auto-approve', 'true', '--', `${PROMPT}\n`],
      env: { CLINE_SESSION_BACKEND_MODE: 'local' },
    });
    expect(cline.invocation(input({ prompt: 'auth' })).args.slice(-2)).toEqual(['--', 'auth\n']);
    expect(cline.invocation(input({ prompt: 'fix it\n' })).args.at(-1)).toBe('fix it\n');
    expect(cline.invocation(input({ permissions: 'read-only' })).args.slice(0, 3)).toEqual(['--json', '--auto-approve', 'false']);
    expect(cline.supportsResume).toBe(false);
  });

  it('every agent adapter supports resume but gemini over ACP and cline headless; shell is never headless', () => {
    for (const a of BUILTIN_AGENTS.filter((b) => b.kind === 'agent')) expect(a.supportsResume, a.name).toBe(a.name !== 'gemini-acp' && a.name !== 'cline');
    expect(adapter('shell').kind).toBe('shell');
    expect(BUILTIN_AGENTS.map((a) => a.name)).toEqual([
      'claude',
      'codex',
      'gemini',
      'qwen',
      'opencode',
      'cursor',
      'amp',
      'copilot',
      'goose',
      'pi',
      'cline',
      'shell',
      'gemini-acp',
      'qwen-acp',
      'opencode-acp',
      'goose-acp',
      'copilot-acp',
      'cline-acp',
    ]);
  });
});

describe('fake CLIs check their flags as the real ones do', () => {
  it.each(['claude', 'codex', 'gemini', 'qwen', 'opencode', 'cursor-agent', 'amp', 'copilot', 'goose', 'cline'])('%s rejects an unknown flag', async (cli) => {
    const { spawnSync } = await import('node:child_process');
    const sub = cli === 'codex' ? ['exec'] : cli === 'opencode' || cli === 'goose' ? ['run'] : [];
    const r = spawnSync(join(FAKE_BIN, cli), [...sub, '--no-such-flag'], { encoding: 'utf8', input: '' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('--no-such-flag');
  });
});

/** A host whose workspace enables every built-in, with the fake CLIs first on the PATH. */
async function cliHost(agents?: string[], more: Record<string, unknown> = {}): Promise<{ host: TestHost; log: string; workspace: string }> {
  const state = mkdtempSync(join(tmpdir(), 'hrw-cli-'));
  dirs.push(state);
  const log = join(state, 'calls.jsonl');
  writeFileSync(log, '');
  const host = await createTestHost({
    workspaces: [
      {
        id: 'ws',
        path: state,
        agents,
        env: {
          PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`,
          FAKE_CLI_STATE: state,
          FAKE_CLI_LOG: log,
          AMP_API_KEY: 'fake-key',
          CODEX_API_KEY: 'fake-key',
        },
      },
      { id: 'other', path: state, env: { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, FAKE_CLI_STATE: state } },
    ],
    agents: { fake: fakeAgent },
    ...more,
  });
  return { host, log, workspace: state };
}

const calls = (log: string) =>
  readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { cli: string; argv: string[]; stdin: string; cwd: string });

async function startRun(host: TestHost, body: Record<string, unknown>) {
  const res = await host.request('POST', '/api/workspaces/ws/headless', { json: body });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('every built-in agent through the HTTP API, with its fake CLI', () => {
  const agents = ['claude', 'codex', 'gemini', 'qwen', 'opencode', 'cursor', 'amp', 'copilot', 'goose'];

  it.each(agents)('%s: runs, captures its session id, resumes it, and judges failure', async (agent) => {
    const { host, log, workspace } = await cliHost();
    const first = await startRun(host, { prompt: PROMPT, agent });
    expect(first.status).toBe(202);
    expect(await host.waitEnded(first.body.taskId)).toMatchObject({ status: 'succeeded', exitCode: 0, agent });
    const session = (await (await host.request('GET', `/api/sessions/${first.body.resumeId}`)).json()) as Record<string, unknown>;
    expect(session).toMatchObject({ agent, status: 'idle', resumable: true, runCount: 1 });
    expect(JSON.stringify(session)).not.toMatch(/agentSessionId/);
    const [call] = calls(log);
    expect(call!.stdin).toBe(PROMPT);
    expect(call!.cwd).toBe(workspace);

    const again = await startRun(host, { prompt: 'continue', resumeId: first.body.resumeId });
    expect(again.status).toBe(202);
    expect(again.body.resumeId).toBe(first.body.resumeId);
    // The fake CLI refuses an unknown session id, so success proves the resume argv carried the captured id.
    expect(await host.waitEnded(again.body.taskId)).toMatchObject({ status: 'succeeded' });
    expect(calls(log)).toHaveLength(2);

    const failed = await startRun(host, { prompt: 'please FAIL', agent, wait: true });
    expect(failed.body).toMatchObject({ status: 'failed' });
  });

  it('a call refused before the model answered: the session id the agent printed is not kept, even when its write lands late', async () => {
    // The write noting qwen's id (printed before its 401) is held until the failed run resets its Session, as a busy
    // machine once ordered it; with the reset waiting on it, until the agent has been gone a second.
    const store = faultyKeyv();
    let pid: number | undefined;
    let held = false;
    let reset = false;
    let goneAt: number | undefined;
    const gone = () => {
      if (pid === undefined || isAlive(pid)) return false;
      goneAt ??= Date.now();
      return Date.now() - goneAt >= 1000;
    };
    store.state.hold = (w) => {
      const v = w.value as { status?: string; agentSessionId?: string; process?: { pid: number } } | undefined;
      if (w.key.startsWith('run:') && v?.process) pid ??= v.process.pid;
      if (held && w.key.startsWith('session:') && v?.agentSessionId === undefined) reset = true;
      if (!(w.key.startsWith('run:') && v?.status === 'running' && v.agentSessionId !== undefined) || held) return undefined;
      held = true;
      return waitFor(() => reset || gone(), { what: 'the Session reset, or the agent gone' });
    };
    const { host } = await cliHost(undefined, { store: store.keyv() });
    const { body } = await startRun(host, { prompt: 'please FAIL', agent: 'qwen', wait: true });
    expect(body).toMatchObject({ status: 'failed' });
    expect(held).toBe(true);
    expect(await (await host.request('GET', `/api/sessions/${body.resumeId}`)).json()).toMatchObject({ resumable: false });
  });

  // No real CLI pinned now reports a failed model call with exit 0 (qwen did up to 0.15; 0.24 exits 1, recorded); amp's fake does, by its docs.
  it.each(['amp'])('%s: a run the agent reports as failed after exit 0 is failed', async (agent) => {
    const { host } = await cliHost();
    const { body } = await startRun(host, { prompt: 'FAIL_EXIT0', agent, wait: true });
    expect(body).toMatchObject({ status: 'failed', exitCode: 0, error: { code: 'agent_error' } });
  });

  it('a full resume round trip shows the real resume argv (claude, codex, gemini)', async () => {
    const { host, log } = await cliHost();
    for (const agent of ['claude', 'codex', 'gemini']) {
      const first = await startRun(host, { prompt: 'first', agent, wait: true });
      const again = await startRun(host, { prompt: 'second', resumeId: first.body.resumeId });
      expect(await host.waitEnded(again.body.taskId)).toMatchObject({ status: 'succeeded' });
      const [a, b] = calls(log).filter((c) => c.cli === agent);
      expect(a!.argv).not.toContain('--resume');
      expect(a!.argv).not.toContain('resume');
      // The id the agent printed on its first run is the one passed back.
      const resumed = agent === 'codex' ? b!.argv[b!.argv.indexOf('resume') + 1] : b!.argv[b!.argv.indexOf('--resume') + 1];
      expect(resumed).toMatch(/^[0-9a-f-]{36}$/);
      expect(b!.stdin).toBe('second');
    }
  });
});

describe('Sessions', () => {
  it('10 simultaneous resumes of one Session: exactly one is admitted', async () => {
    const host = await createTestHost();
    const first = await startRun(host, { prompt: 'session sess-1', agent: 'fake', wait: true });
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(
        Array.from({ length: 10 }, () => host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'sleep 300', resumeId: first.body.resumeId } })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([202, ...Array(9).fill(409)]);
      const busy = results.find((r) => r.status === 409)!;
      expect((await problem(busy)).code).toBe('session_busy');
      const winner = (await results.find((r) => r.status === 202)!.json()) as { taskId: string };
      expect(((await (await host.request('GET', `/api/sessions/${first.body.resumeId}`)).json()) as { status: string }).status).toBe('busy');
      await host.waitEnded(winner.taskId);
    }
  });

  it('resume of a run still in flight is session_busy; after it ends it is accepted', async () => {
    const host = await createTestHost();
    const first = await startRun(host, { prompt: 'session sess-2; sleep 500', agent: 'fake' });
    expect((await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', resumeId: first.body.resumeId } }))).code).toBe(
      'session_busy',
    );
    await host.waitEnded(first.body.taskId);
    expect((await startRun(host, { prompt: 'echo y', resumeId: first.body.resumeId })).status).toBe(202);
  });

  it('other workspace, retired, not resumable, agent mismatch', async () => {
    const host = await createTestHost({
      agents: { fake: fakeAgent, plain: { command: process.execPath, args: [fakeAgent.args[0]!, '{prompt}'] }, noid: { ...fakeAgent } },
      workspaces: [
        { id: 'ws', path: '/tmp', agents: ['fake', 'plain', 'noid'] },
        { id: 'other', path: '/tmp', agents: ['fake'] },
      ],
    });
    const withId = await startRun(host, { prompt: 'session sess-3', agent: 'fake', wait: true });
    const other = await host.request('POST', '/api/workspaces/other/headless', { json: { prompt: 'x', resumeId: withId.body.resumeId } });
    expect(await problem(other)).toMatchObject({ status: 409, code: 'session_other_workspace' });
    const mismatch = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'plain', resumeId: withId.body.resumeId } });
    expect(await problem(mismatch)).toMatchObject({ status: 409, code: 'session_not_resumable' });

    const noResume = await startRun(host, { prompt: 'echo x', agent: 'plain', wait: true });
    expect(await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', resumeId: noResume.body.resumeId } }))).toMatchObject(
      { code: 'session_not_resumable' },
    );
    expect(((await (await host.request('GET', `/api/sessions/${noResume.body.resumeId}`)).json()) as { resumable: boolean }).resumable).toBe(false);

    const neverPrinted = await startRun(host, { prompt: 'echo no id here', agent: 'noid', wait: true });
    expect(
      await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', resumeId: neverPrinted.body.resumeId } })),
    ).toMatchObject({ code: 'session_not_resumable' });

    const retire = await host.request('POST', `/api/sessions/${withId.body.resumeId}/retire`);
    expect(retire.status).toBe(200);
    expect(await retire.json()).toMatchObject({ status: 'retired', resumable: false });
    expect(await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', resumeId: withId.body.resumeId } }))).toMatchObject({
      status: 409,
      code: 'session_retired',
    });
  });

  it('custom agents: the session id comes from sessionIdPattern, or is the resumeId without one', async () => {
    const host = await createTestHost({
      agents: {
        fake: fakeAgent,
        plainresume: { command: process.execPath, args: [fakeAgent.args[0]!, '{prompt}'], resumeArgs: [fakeAgent.args[0]!, 'echo {agentSessionId}'] },
      },
      workspaces: [{ id: 'ws', path: '/tmp', agents: ['fake', 'plainresume'] }],
    });
    const first = await startRun(host, { prompt: 'echo start', agent: 'plainresume', wait: true });
    const again = await startRun(host, { prompt: 'ignored', resumeId: first.body.resumeId });
    await host.waitEnded(again.body.taskId);
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', resumeId: first.body.resumeId } });
    expect(res.status).toBe(202);
    await host.waitEnded(((await res.json()) as { taskId: string }).taskId);
  });
});

describe('live registered adapter order', () => {
  it('only considers adapters whose executable is on the PATH at request time', async () => {
    const only = mkdtempSync(join(tmpdir(), 'hrw-path-'));
    dirs.push(only);
    const { symlinkSync } = await import('node:fs');
    symlinkSync(join(FAKE_BIN, 'gemini'), join(only, 'gemini'));
    const host = await createTestHost({
      workspaces: [{ id: 'ws', path: only, env: { PATH: `${only}${delimiter}${process.env.PATH}`, FAKE_CLI_STATE: join(only, 'state') } }],
      agents: {},
    });
    const { body } = await startRun(host, { prompt: 'hello', wait: true });
    expect(body).toMatchObject({ agent: 'gemini', status: 'succeeded' });
    symlinkSync(join(FAKE_BIN, 'claude'), join(only, 'claude'));
    const next = await startRun(host, { prompt: 'hello', wait: true });
    // The most recent headless agent (gemini) now comes before the registry order.
    expect(next.body.agent).toBe('gemini');
  });
});

describe('an executable is not proof that it is the agent', () => {
  /** A folder whose `goose` is the database-migration tool of the same name (npm `goose-cli`). */
  function impostorGoose(): string {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-goose-'));
    dirs.push(dir);
    const file = join(dir, 'goose');
    writeFileSync(file, '#!/bin/sh\necho "Usage: goose [OPTIONS] DRIVER DBSTRING <command>"\necho "Drivers: postgres mysql sqlite3"\nexit 0\n', {
      mode: 0o755,
    });
    return dir;
  }

  it('selection skips a goose that is not the agent; naming it fails at spawn, saying what it is', async () => {
    const dir = impostorGoose();
    const PATH = `${dir}${delimiter}/usr/bin${delimiter}/bin`;
    const host = await createTestHost({ workspaces: [{ id: 'ws', path: dir, agents: ['goose'], env: { PATH } }], agents: {} });
    expect(await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x' } }))).toMatchObject({
      status: 400,
      code: 'no_headless_agent',
    });
    const named = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'goose' } });
    const body = (await named.json()) as { code: string; detail: string; taskId: string };
    expect(named.status).toBe(500);
    expect(body.code).toBe('spawn_failed');
    expect(body.detail).toMatch(/is not the goose agent CLI/);
    expect(await host.waitEnded(body.taskId)).toMatchObject({ status: 'failed', error: { code: 'spawn_failed' } });
  });

  it('a probe that was killed is not remembered: the next request probes again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-goose-'));
    dirs.push(dir);
    // Killed by a signal on its first call; Block's goose help after that.
    writeFileSync(
      join(dir, 'goose'),
      `#!/bin/sh\nif [ ! -f "${dir}/seen" ]; then touch "${dir}/seen"; kill -9 $$; fi\nprintf 'Usage: goose [COMMAND]\\n  session\\n  run\\n'\n`,
      { mode: 0o755 },
    );
    const host = await createTestHost({
      workspaces: [{ id: 'ws', path: dir, agents: ['goose'], env: { PATH: `${dir}${delimiter}/usr/bin${delimiter}/bin` } }],
      agents: {},
    });
    expect(await problem(await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x' } }))).toMatchObject({ code: 'no_headless_agent' });
    const second = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', wait: true } });
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ agent: 'goose' });
  });

  it('the real goose (its fake answers --help as Block’s does) is selected', async () => {
    const { host } = await cliHost(['goose']);
    const { body } = await startRun(host, { prompt: 'hello', wait: true });
    expect(body).toMatchObject({ agent: 'goose', status: 'succeeded' });
  });
});

describe('amp without credentials', () => {
  it('fails at once with spawn_failed naming what to set, instead of waiting at its login prompt', async () => {
    const state = mkdtempSync(join(tmpdir(), 'hrw-amp-'));
    dirs.push(state);
    const host = await createTestHost({
      workspaces: [{ id: 'ws', path: state, agents: ['amp'], env: { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, FAKE_CLI_STATE: state, HOME: state } }],
      agents: {},
    });
    const started = Date.now();
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'x', agent: 'amp', wait: true, timeoutMs: 20_000 } });
    const body = (await res.json()) as { code: string; detail: string };
    expect(res.status).toBe(500);
    expect(body).toMatchObject({ code: 'spawn_failed' });
    expect(body.detail).toMatch(/no credentials.*AMP_API_KEY/);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(host.spawner.count).toBe(0);
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
