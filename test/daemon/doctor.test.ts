import { symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cleanupDaemons, runCli } from '../helpers/daemon';
import { REAL_BIN, dir, doctor, removeDirs } from '../helpers/doctor';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';

afterEach(closeAllHosts);
afterAll(() => {
  cleanupDaemons();
  removeDirs();
});

/** A folder of stand-ins: a goose that is the migration tool, and a claude too old for `--verbose`. */
function impostors(): string {
  const d = dir();
  writeFileSync(join(d, 'goose'), '#!/bin/sh\necho "Usage: goose [OPTIONS] DRIVER DBSTRING <command>"\n', { mode: 0o755 });
  writeFileSync(
    join(d, 'claude'),
    '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "0.2.9 (Claude Code)"; else echo "Usage: claude [options]\n  -p, --print\n  --output-format <format>\n  --dangerously-skip-permissions\n  -r, --resume [id]"; fi\n',
    { mode: 0o755 },
  );
  return d;
}

describe('headless-run-webhook doctor', () => {
  it('an impostor, an old version and a missing agent: each said, with what to do; exit 1', async () => {
    const ws = dir();
    const r = await doctor({
      workspaces: [
        { id: 'ws', path: ws, agents: ['goose', 'claude', 'cursor'], env: { PATH: `${impostors()}${delimiter}/usr/bin${delimiter}/bin` } },
        { id: 'bare', path: ws, agents: ['codex'], env: { PATH: `${REAL_BIN}${delimiter}/usr/bin${delimiter}/bin`, HOME: dir() } },
      ],
    });
    expect(r.code).toBe(1);
    // codex never ends without credentials: for it they are required.
    expect(r.stdout).toMatch(/codex\s+broken/);
    expect(r.stdout).toMatch(
      /no credentials found: set OPENAI_API_KEY or CODEX_API_KEY or ~\/.codex\/auth.json or ~\/.codex\/config.toml or \$CODEX_HOME\/auth.json or \$CODEX_HOME\/config.toml\n/,
    );
    expect(r.stdout).toMatch(/goose\s+broken/);
    expect(r.stdout).toMatch(/is not the goose agent CLI: put the real one first on the PATH/);
    expect(r.stdout).toMatch(/claude\s+broken\s+\* 0\.2\.9 \(Claude Code\)/);
    expect(r.stdout).toMatch(/does not list --verbose: upgrade claude/);
    expect(r.stdout).toMatch(/cursor\s+missing/);
    expect(r.stdout).toMatch(/"cursor-agent" is not on the PATH of workspace "ws": install it/);
  });

  it('agents only enabled by default do not fail it while one can run; none at all does', async () => {
    const ws = dir();
    // One real CLI that can run (the test above checks them all), the other defaults missing.
    const one = dir();
    symlinkSync(join(REAL_BIN, 'claude'), join(one, 'claude'));
    const some = await doctor({
      workspaces: [{ id: 'ws', path: ws, env: { PATH: `${one}${delimiter}/usr/bin${delimiter}/bin`, ANTHROPIC_API_KEY: 'sk-test' } }],
    });
    expect(some.code, some.stdout).toBe(0);
    expect(some.stdout).toMatch(/goose\s+missing/);
    // One that can run, but found no credentials (copilot's may be configured another way, so it is not refused): it fails.
    const other = dir();
    symlinkSync(join(REAL_BIN, 'copilot'), join(other, 'copilot'));
    const bare = await doctor({
      workspaces: [{ id: 'ws', path: ws, agents: ['copilot'], env: { PATH: `${other}${delimiter}/usr/bin${delimiter}/bin`, HOME: dir() } }],
    });
    expect(bare.code, bare.stdout).toBe(1);
    expect(bare.stdout).toContain('none of its agents found credentials (copilot)');
    const none = await doctor({ workspaces: [{ id: 'ws', path: ws, env: { PATH: '/nonexistent' } }] });
    expect(none.code).toBe(1);
    expect(none.stdout).toMatch(/no agent can run here/);
  });

  it("a custom agent's placeholder typo, a missing {prompt}, and a headless agent not enabled where it is named: each said; exit 1", async () => {
    const ws = dir();
    const r = await doctor({
      agents: {
        typo: { command: process.execPath, args: ['agent.js', '--prompt={promt}'], resumeArgs: ['agent.js', '{prompt}', '{resumeID}'] },
        mute: { command: process.execPath, args: ['agent.js'] },
      },
      workspaces: [{ id: 'ws', path: ws, agents: ['typo', 'mute'], headlessAgent: 'claude', env: { PATH: `${REAL_BIN}${delimiter}/usr/bin${delimiter}/bin` } }],
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/typo\s+broken/);
    expect(r.stdout).toContain('agents.typo.args has {promt}, which is no placeholder (did you mean {prompt}?)');
    expect(r.stdout).toContain('agents.typo.args never passes the prompt: put {prompt} in "stdin" (out of the process list) or an argument');
    expect(r.stdout).toContain('agents.typo.resumeArgs has {resumeID}, which is no placeholder (did you mean {resumeId}?)');
    expect(r.stdout).toMatch(/mute\s+broken/);
    expect(r.stdout).toContain('agents.mute.args never passes the prompt');
    expect(r.stdout).toContain('its headlessAgent "claude" is not enabled on it: add "claude" to the workspace\'s agents, or name one that is');
  });

  it('says what it checks as it goes, on stderr', async () => {
    const r = await doctor({ workspaces: [{ id: 'ws', path: dir(), agents: ['claude', 'codex'], env: { PATH: '/nonexistent' } }] });
    expect(r.stderr).toMatch(/^checking the agents of 1 workspace\(s\)…\n/);
    expect(r.stderr).toMatch(/checked claude on ws: missing \(\d+\.\d s\)/);
    expect(r.stderr).toMatch(/checked codex on ws: missing \(\d+\.\d s\)/);
  });

  it('a bad config or flag: exit 2 with a message saying what is wrong', async () => {
    const bad = await doctor({ workspaces: [{ id: 'ws', path: '/nonexistent/path' }] });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/workspace "ws" path \/nonexistent\/path does not exist/);
    const flag = await doctor({}, ['--frobnicate']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/Unknown option '--frobnicate'/);
  });
});

describe('GET /api/agents', () => {
  it('reports every workspace, or the one named; bad queries and unknown workspaces are problems', async () => {
    const host = await createTestHost({ env: { PATH: `${impostors()}${delimiter}/usr/bin${delimiter}/bin` } });
    const all = (await (await host.request('GET', '/api/agents')).json()) as { workspaces: Array<{ workspaceId: string; agents: Array<Record<string, any>> }> };
    expect(all.workspaces.map((w) => w.workspaceId)).toEqual(['ws', 'other']);
    const claude = all.workspaces[0]!.agents.find((a) => a.agent === 'claude')!;
    expect(claude).toMatchObject({ configured: true, canRun: false, unknownFlags: ['--verbose'] });
    const one = (await (await host.request('GET', '/api/agents?wsId=other')).json()) as { workspaces: Array<{ workspaceId: string }> };
    expect(one.workspaces.map((w) => w.workspaceId)).toEqual(['other']);
    expect(await problem(await host.request('GET', '/api/agents?wsId=nope'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
    expect(await problem(await host.request('GET', '/api/agents?x=1'))).toMatchObject({ status: 400, code: 'invalid_body' });
    expect(await problem(await host.request('POST', '/api/agents'))).toMatchObject({ status: 405, code: 'method_not_allowed' });
  });

  it('with a workspace resolver, wsId is required', async () => {
    const host = await createTestHost({ workspaces: (id) => (id === 'ws' ? { id: 'ws', path: '/tmp' } : undefined) });
    expect(await problem(await host.request('GET', '/api/agents'))).toMatchObject({ status: 400, code: 'invalid_body' });
    expect((await host.request('GET', '/api/agents?wsId=ws')).status).toBe(200);
  });

  it('is behind the same gate', async () => {
    const host = await createTestHost();
    expect(await problem(await host.request('GET', '/api/agents', { remote: '203.0.113.9' }))).toMatchObject({ status: 401, code: 'unauthorized' });
  });
});

describe('run by npx in a clone', () => {
  it('the agent CLIs this repository installs for its tests are not taken for the user’s: doctor does not find them', async () => {
    const cwd = dir();
    writeFileSync(join(cwd, 'headless.config.json'), JSON.stringify({ workspaces: [{ id: 'ws', path: cwd, agents: ['claude'] }] }));
    // What npx gives the command: its project's node_modules/.bin first on the PATH.
    const PATH = [REAL_BIN, process.env.PATH].join(delimiter);
    const found = async (env: NodeJS.ProcessEnv) => {
      const r = await runCli(['doctor', '--json'], { cwd, env: { PATH, ...env }, timeoutMs: 480_000 });
      return (JSON.parse(r.stdout) as { workspaces: Array<{ agents: Array<{ path: string | null }> }> }).workspaces[0]!.agents[0]!.path;
    };
    expect(await found({ npm_command: 'exec' })).toBeNull();
    // Started otherwise (a service manager, a test pointing it there on purpose), that PATH is used as given.
    expect(await found({ npm_command: '' })).toBe(join(REAL_BIN, 'claude'));
  });
});
