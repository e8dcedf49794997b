import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupDaemons } from '../helpers/daemon';
import { REAL_BIN, dir, doctor, removeDirs } from '../helpers/doctor';

/** `doctor` against the real agent CLIs this repository installs (the real-CLI tier: docs/testing.md). */
afterAll(() => {
  cleanupDaemons();
  removeDirs();
});

describe('headless-run-webhook doctor, on the real CLIs', () => {
  it('the real CLIs: found, versioned, really themselves, their flags known, credentials by name; exit 0', async () => {
    const ws = dir();
    mkdirSync(join(ws, '.codex'));
    writeFileSync(join(ws, '.codex/config.toml'), 'model_provider = "local"\n');
    // goose's npm package names its binary for its platform: the docs say to link it as `goose`.
    const links = dir();
    symlinkSync(join(REAL_BIN, 'goose-binary-linux-x64'), join(links, 'goose'));
    const r = await doctor(
      {
        workspaces: [
          {
            id: 'ws',
            path: ws,
            agents: ['claude', 'codex', 'gemini', 'qwen', 'opencode', 'copilot', 'goose', 'pi', 'cline', 'amp'],
            env: { PATH: [links, REAL_BIN, process.env.PATH].join(delimiter), HOME: ws, AMP_API_KEY: 'set' },
          },
        ],
      },
      ['--json'],
    );
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as { workspaces: Array<{ workspaceId: string; agents: Array<Record<string, any>> }> };
    const checks: Record<string, Record<string, any>> = Object.fromEntries(report.workspaces[0]!.agents.map((a) => [a.agent, a]));
    expect(Object.keys(checks).sort()).toEqual(['amp', 'claude', 'cline', 'codex', 'copilot', 'gemini', 'goose', 'opencode', 'pi', 'qwen']);
    for (const check of Object.values(checks)) {
      expect(check, check.agent).toMatchObject({ configured: true, canRun: true, unknownFlags: [] });
      expect(check.path).toContain(check.agent === 'goose' ? links : REAL_BIN);
      expect(check.version).toMatch(/\d+\.\d+/);
    }
    // The version the pinned package prints (HEADLESS_REAL_CLI_BIN's newest, under test:latest-clis, prints its own).
    const pinned = JSON.parse(readFileSync(join(__dirname, '../../package.json'), 'utf8')).devDependencies['@anthropic-ai/claude-code'];
    expect(checks.claude).toMatchObject({ isAgent: true, credentials: ['ANTHROPIC_API_KEY'] });
    if (!process.env.HEADLESS_REAL_CLI_BIN) expect(checks.claude?.version).toBe(`${pinned} (Claude Code)`);
    expect(checks.codex).toMatchObject({ isAgent: true, credentials: ['~/.codex/config.toml'] });
    // amp accepts --dangerously-allow-all without listing it in --help (the real-CLI tier proves it).
    expect(checks.amp).toMatchObject({ credentials: ['AMP_API_KEY'], problems: [] });
    expect(checks.goose).toMatchObject({ version: '1.52.0', isAgent: true });
    expect(checks.cline).toMatchObject({ version: '3.0.65', isAgent: true });
    expect(checks.pi).toMatchObject({ isAgent: true });
    expect(checks.gemini).toMatchObject({ credentials: [] });
    expect(checks.gemini!.problems.join()).toMatch(/no credentials found: set GEMINI_API_KEY.*unless it is configured another way/);
  });

  it('the ACP twins: each answers initialize, saying its protocol version and whether it loads sessions; one that does not answer is said', async () => {
    const ws = dir();
    const links = dir();
    symlinkSync(join(REAL_BIN, 'goose-binary-linux-x64'), join(links, 'goose'));
    // A qwen that is no ACP agent: it exits at once, whatever it is asked.
    const mute = dir();
    writeFileSync(join(mute, 'qwen'), '#!/bin/sh\necho "qwen 9.9.9"\n', { mode: 0o755 });
    const twins = ['gemini-acp', 'opencode-acp', 'goose-acp', 'copilot-acp', 'cline-acp'];
    const r = await doctor(
      {
        workspaces: [
          { id: 'ws', path: ws, agents: twins, env: { PATH: [links, REAL_BIN, process.env.PATH].join(delimiter), HOME: ws } },
          { id: 'mute', path: ws, agents: ['qwen-acp'], env: { PATH: [mute, process.env.PATH].join(delimiter), HOME: ws } },
        ],
      },
      ['--json'],
    );
    const report = JSON.parse(r.stdout) as { workspaces: Array<{ workspaceId: string; agents: Array<Record<string, any>> }> };
    const checks: Record<string, Record<string, any>> = Object.fromEntries(report.workspaces[0]!.agents.map((a) => [a.agent, a]));
    for (const twin of twins) expect(checks[twin]!.protocol, twin).toEqual({ protocol: 'acp', version: 1, loadSession: true });
    expect(checks['gemini-acp']!.problems.join()).not.toMatch(/initialize|load a session/);
    const mutes = report.workspaces[1]!.agents[0]!;
    expect(mutes).toMatchObject({ agent: 'qwen-acp', canRun: false, protocol: { protocol: 'acp', error: expect.any(String) } });
    expect(mutes.problems.join('\n')).toMatch(/qwen-acp did not answer acp's initialize: /);
  });
});
