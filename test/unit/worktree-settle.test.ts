import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { settleWorktree } from '../../src/core/worktrees/changes';
import { WorktreePlacement } from '../../src/core/worktrees/worktree-placement';
import type { WorktreeRecord } from '../../src/core/types';

/** docs/worktrees.md: what a run changed is read as it ends, and again by crash recovery after a kill -9. */

const root = mkdtempSync(join(tmpdir(), 'hrw-settle-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const sh = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd, encoding: 'utf8' }).trim();

function worktree(name: string): WorktreeRecord {
  const repo = join(root, name);
  execFileSync('git', ['init', '-q', '-b', 'main', repo]);
  writeFileSync(join(repo, 'README.md'), '# r\n');
  sh(repo, 'add', '.');
  sh(repo, 'commit', '-qm', 'first');
  const base = sh(repo, 'rev-parse', 'HEAD');
  const path = join(root, `${name}-wt`);
  sh(repo, 'worktree', 'add', '-q', '-b', `headless/ses_${name}`, path, base);
  return { repo, path, branch: `headless/ses_${name}`, base, created: true, cleanup: 'never' };
}

describe('settling a run’s worktree', () => {
  it('settled again after a crash (the service’s commit made, its record not yet written): committed is still true', async () => {
    const w = worktree('again');
    writeFileSync(join(w.path, 'work.txt'), 'left uncommitted\n');
    const first = await settleWorktree(w, 'run_again');
    expect(first.changes).toMatchObject({ committed: true, files: [{ path: 'work.txt', status: 'added' }] });
    const second = await settleWorktree(w, 'run_again');
    expect(second.changes).toMatchObject({ committed: true, head: first.changes.head, files: [{ path: 'work.txt', status: 'added' }] });
  });

  it('work the agent committed itself, nothing left: committed is false (the service made no commit)', async () => {
    const w = worktree('own');
    writeFileSync(join(w.path, 'own.txt'), 'its own commit\n');
    sh(w.path, 'add', '.');
    sh(w.path, 'commit', '-qm', 'the agent’s commit');
    expect((await settleWorktree(w, 'run_own')).changes).toMatchObject({ committed: false, files: [{ path: 'own.txt' }] });
    // Another run's commit message is not this run's.
    expect((await settleWorktree(w, 'run_other')).changes.committed).toBe(false);
  });
});

describe('the start-up sweep of worktrees', () => {
  it('a run whose end was recorded (its folder kept) before its release (a crash between): the folder stays, unlocked, as its record says', async () => {
    const repo = join(root, 'swept');
    execFileSync('git', ['init', '-q', '-b', 'main', repo]);
    writeFileSync(join(repo, 'README.md'), '# r\n');
    sh(repo, 'add', '.');
    sh(repo, 'commit', '-qm', 'first');
    const base = sh(repo, 'rev-parse', 'HEAD');
    const wtRoot = join(root, 'swept-root');
    mkdirSync(join(wtRoot, 'ws'), { recursive: true });
    const path = join(wtRoot, 'ws', 'ses_swept');
    sh(repo, 'worktree', 'add', '-q', '-b', 'headless/ses_swept', path, base);
    writeFileSync(join(path, 'kept.txt'), 'work\n');
    sh(path, 'add', '.');
    sh(path, 'commit', '-qm', 'headless-run-webhook: work left uncommitted by run run_swept');
    sh(repo, 'worktree', 'lock', '--reason', 'headless-run-webhook: run run_swept', path);
    const head = sh(repo, 'rev-parse', 'headless/ses_swept');
    const changes = { branch: 'headless/ses_swept', base, head, committed: true, files: [{ path: 'kept.txt', status: 'added' as const }], worktree: path };
    const placement = new WorktreePlacement({ root: wtRoot, workspaces: () => [], log: () => undefined });
    await placement.sweep({ workspaces: [{ id: 'ws', path: repo }], ended: async (taskId) => (taskId === 'run_swept' ? { changes } : undefined) });
    expect(existsSync(join(path, 'kept.txt'))).toBe(true);
    const listed = sh(repo, 'worktree', 'list', '--porcelain');
    expect(listed).toContain(`worktree ${path}`);
    expect(listed).not.toContain('locked');
  });
});
