import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/cli/config';

/** docs/configuration.md, The run spec: the config file's `run`, and the keys of its shape before refused, naming where they went. */

const dir = mkdtempSync(join(tmpdir(), 'hrw-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function load(config: unknown) {
  const file = join(dir, 'headless.config.json');
  writeFileSync(file, JSON.stringify(config), { mode: 0o600 });
  return () => loadConfig(file, dir);
}

const schedule = { name: 'n', cron: '0 3 * * *', workspace: 'ws', prompt: 'p' };
const trigger = { name: 't', workspace: 'ws', sender: 'github', secret: 's', prompt: 'p' };

describe('the config file’s run spec', () => {
  it('is read from a workspace’s, a schedule’s and a trigger’s run', () => {
    const config = load({
      workspaces: [{ id: 'ws', path: '.', run: { permissions: 'ask', approvals: { fallback: 'allow' }, isolation: 'worktree', ref: 'main' } }],
      schedules: [{ ...schedule, run: { agent: 'claude', timeoutMs: 60_000, title: 'nightly' } }],
      triggers: [{ ...trigger, run: { sandbox: true, maxCostUsd: 1 } }],
    })();
    expect(config.workspaces[0]?.run).toEqual({ permissions: 'ask', approvals: { fallback: 'allow' }, isolation: 'worktree', ref: 'main' });
    expect(config.schedules?.[0]?.run).toEqual({ agent: 'claude', timeoutMs: 60_000, title: 'nightly' });
    expect(config.triggers?.[0]?.run).toEqual({ sandbox: true, maxCostUsd: 1 });
  });

  it('a run’s checks under a trigger’s own verify (its sender’s signature) are refused, naming where they go', () => {
    const verify = { checks: [{ name: 'tests', command: 'npm test' }] };
    expect(load({ workspaces: [{ id: 'ws', path: '.' }], triggers: [{ ...trigger, verify }] })).toThrow(
      'unknown key "triggers[0].verify.checks": a trigger\'s "verify" checks its sender\'s signature; a run\'s checks go in "triggers[0].run.verify.checks"',
    );
  });

  it('refuses a key of the shape before, naming where it moved', () => {
    expect(load({ workspaces: [{ id: 'ws', path: '.', sandbox: true }] })).toThrow(
      '"workspaces[0].sandbox" has moved into the run spec: write it as "workspaces[0].run.sandbox"',
    );
    expect(load({ workspaces: [{ id: 'ws', path: '.' }], schedules: [{ ...schedule, agent: 'claude' }] })).toThrow(
      '"schedules[0].agent" has moved into the run spec: write it as "schedules[0].run.agent"',
    );
    expect(load({ workspaces: [{ id: 'ws', path: '.' }], triggers: [{ ...trigger, title: '{{ event }}' }] })).toThrow(
      '"triggers[0].title" has moved into the run spec: write it as "triggers[0].run.title"',
    );
    expect(load({ workspaces: [{ id: 'ws', path: '.', worktree: { ref: 'main' } }] })).toThrow(
      '"workspaces[0].worktree.ref" has moved into the run spec: write it as "workspaces[0].run.ref"',
    );
  });

  it('says what a run spec field expected, and refuses an agent on a workspace', () => {
    expect(load({ workspaces: [{ id: 'ws', path: '.', run: { permissions: 'none' } }] })).toThrow('"workspaces[0].run.permissions" is invalid: expected');
    expect(load({ workspaces: [{ id: 'ws', path: '.', run: { agent: 'claude' } }] })).toThrow('unknown key "workspaces[0].run.agent"');
    expect(load({ workspaces: [{ id: 'ws', path: '.', run: { maxTurns: 0 } }] })).toThrow('"workspaces[0].run.maxTurns" is invalid');
  });
});
