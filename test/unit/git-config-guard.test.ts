import { describe, expect, it } from 'vitest';
import { commandKeyOverrides } from '../../src/core/worktrees/git-config-guard';

/** docs/worktrees.md: What the service's git trusts: every key that names a program is overridden. */
describe('the configuration keys the service overrides', () => {
  it('empties every key that names a program, switches filters off and makes a submodule update a checkout', () => {
    const keys = [
      'core.fsmonitor',
      'core.sshcommand',
      'core.pager',
      'pager.status',
      'diff.evil.textconv',
      'diff.evil.command',
      'merge.evil.driver',
      'credential.https://example.com.helper',
      'gpg.ssh.program',
      'hook.pre.command',
      'filter.a=b.clean',
      'submodule.Sub.update',
      'user.name',
      'core.bare',
    ];
    const overrides = new Map(commandKeyOverrides(keys, false));
    for (const key of keys.slice(0, 10)) expect(overrides.get(key), key).toBe('');
    for (const part of ['clean', 'smudge', 'process']) expect(overrides.get(`filter.a=b.${part}`)).toBe('');
    expect(overrides.get('filter.a=b.required')).toBe('false');
    expect(overrides.get('submodule.Sub.update')).toBe('checkout');
    expect(overrides.has('user.name')).toBe(false);
    expect(overrides.has('core.bare')).toBe(false);
    // Without git-lfs, its filters are off even where no key names them.
    expect(overrides.get('filter.lfs.process')).toBe('');
  });

  it('keeps Git LFS where git-lfs is installed, pinned to its own commands', () => {
    // As `git lfs install` leaves it: in the user's configuration, which the service does not read.
    const overrides = new Map(commandKeyOverrides([], true));
    expect(overrides.get('filter.lfs.clean')).toBe('git-lfs clean -- %f');
    expect(overrides.get('filter.lfs.smudge')).toBe('git-lfs smudge -- %f');
    expect(overrides.get('filter.lfs.process')).toBe('git-lfs filter-process');
  });
});
