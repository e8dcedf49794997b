import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UnreadableConfig, everyConfigKey } from '../../src/core/worktrees/config-files';

/** docs/worktrees.md: What the service's git trusts: every file the configuration could include, whatever its condition. */
const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const read = async (file: string) => execFileSync('git', ['config', '--file', file, '--list', '--no-includes', '-z'], { encoding: 'utf8' });

function gitDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'config-files-'));
  made.push(dir);
  mkdirSync(join(dir, 'worktrees', 'w1'), { recursive: true });
  return dir;
}

describe('the keys of a repository configuration, every include followed', () => {
  it('follows includes under any condition, nested, relative to the including file and from ~, and every config.worktree', async () => {
    const dir = gitDir();
    const home = mkdtempSync(join(tmpdir(), 'config-home-'));
    made.push(home);
    writeFileSync(join(dir, 'config'), '[core]\n\tbare = false\n[includeIf "hasconfig:remote.*.url:nothing"]\n\tpath = sub/a.cfg\n');
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'a.cfg'), '[filter "a"]\n\tsmudge = x\n[includeIf "gitdir/i:/nowhere/"]\n\tpath = b.cfg\n');
    writeFileSync(join(dir, 'sub', 'b.cfg'), '[include]\n\tpath = ~/c.cfg\n[diff "b"]\n\ttextconv = x\n');
    writeFileSync(join(home, 'c.cfg'), '[merge "c"]\n\tdriver = x\n');
    writeFileSync(join(dir, 'worktrees', 'w1', 'config.worktree'), '[core]\n\tfsmonitor = x\n');
    const before = process.env.HOME;
    process.env.HOME = home;
    try {
      const keys = await everyConfigKey(dir, read);
      expect(keys).toEqual(expect.arrayContaining(['filter.a.smudge', 'diff.b.textconv', 'merge.c.driver', 'core.fsmonitor']));
    } finally {
      process.env.HOME = before;
    }
  });

  it('refuses an include it cannot read, and a loop is read once', async () => {
    const dir = gitDir();
    writeFileSync(join(dir, 'config'), '[include]\n\tpath = config\n[includeIf "onbranch:x"]\n\tpath = missing.cfg\n');
    await expect(everyConfigKey(dir, read)).rejects.toBeInstanceOf(UnreadableConfig);
    writeFileSync(join(dir, 'config'), '[include]\n\tpath = config\n[user]\n\tname = n\n');
    expect(await everyConfigKey(dir, read)).toEqual(['include.path', 'user.name']);
  });
});
