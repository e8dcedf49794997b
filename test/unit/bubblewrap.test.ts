import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentHomeMounts, placeOf } from '../../src/core/sandbox/agent-home';
import { type Mount, bubblewrapArgs } from '../../src/core/sandbox/bubblewrap';
import { hiddenMounts, installMounts } from '../../src/core/sandbox/view';

const at = (args: string[], ...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));

describe('bubblewrapArgs', () => {
  const mounts: Mount[] = [
    { kind: 'ro', source: '/usr', path: '/usr' },
    { kind: 'link', target: 'usr/bin', path: '/bin' },
    { kind: 'tmpfs', path: '/run', readOnly: true },
    { kind: 'hide', path: '/srv/ws/.headless', folder: true },
    { kind: 'rw', source: '/srv/ws', path: '/srv/ws' },
    { kind: 'hide', path: '/srv', folder: true },
    { kind: 'tmpfs', path: '/home/u', readOnly: false },
    { kind: 'rw', source: '/var/lib/hrw/agent-state/ws/.claude', path: '/home/u/.claude' },
    { kind: 'ro', source: '/home/u/.claude/settings.json', path: '/home/u/.claude/settings.json' },
    { kind: 'hide', path: '/etc/shadow', folder: false },
  ];
  const args = bubblewrapArgs({ mounts, isolateNetwork: false }, '/srv/ws', 'claude', ['-p']);

  it('starts from an empty root: nothing of / is bound, only what is listed', () => {
    expect(at(args, '--ro-bind', '/', '/')).toBe(-1);
    expect(at(args, '--ro-bind', '/usr', '/usr')).toBeGreaterThan(-1);
    expect(at(args, '--symlink', 'usr/bin', '/bin')).toBeGreaterThan(-1);
  });

  it('mounts a folder before what goes inside it, whatever order they were listed in', () => {
    // A hidden parent (another workspace) before the workspace bound into it; the workspace before the data directory hidden in it.
    expect(at(args, '--tmpfs', '/srv')).toBeLessThan(at(args, '--bind', '/srv/ws', '/srv/ws'));
    expect(at(args, '--bind', '/srv/ws', '/srv/ws')).toBeLessThan(at(args, '--tmpfs', '/srv/ws/.headless'));
    // HOME, then the workspace's agent state in it, then the operator's configuration over that.
    expect(at(args, '--tmpfs', '/home/u')).toBeLessThan(at(args, '--bind', '/var/lib/hrw/agent-state/ws/.claude', '/home/u/.claude'));
    expect(at(args, '--bind', '/var/lib/hrw/agent-state/ws/.claude', '/home/u/.claude')).toBeLessThan(
      at(args, '--ro-bind', '/home/u/.claude/settings.json', '/home/u/.claude/settings.json'),
    );
    expect(at(args, '--ro-bind', '/dev/null', '/etc/shadow')).toBeGreaterThan(-1);
  });

  it('makes the empty folders and the root read-only once everything is mounted; HOME and the workspace stay writable', () => {
    const remounted = args.flatMap((arg, i) => (arg === '--remount-ro' ? [args[i + 1]] : []));
    expect(remounted.sort()).toEqual(['/', '/run', '/srv', '/srv/ws/.headless']);
    expect(at(args, '--remount-ro', '/')).toBeGreaterThan(at(args, '--ro-bind', '/home/u/.claude/settings.json', '/home/u/.claude/settings.json'));
  });

  it('whoever starts it: a user namespace of its own, no new ones inside, every capability dropped, a pid namespace', () => {
    for (const flag of ['--unshare-user', '--disable-userns', '--unshare-pid']) expect(args).toContain(flag);
    expect(at(args, '--cap-drop', 'ALL')).toBeGreaterThan(-1);
    // The kernel's knobs read-only (kernel.core_pattern names a program the kernel runs as root).
    expect(at(args, '--ro-bind', '/proc/sys', '/proc/sys')).toBeGreaterThan(-1);
    expect(args.slice(-5)).toEqual(['--chdir', '/srv/ws', '--', 'claude', '-p']);
  });

  it('a limited network: a network namespace of its own', () => {
    expect(args).not.toContain('--unshare-net');
    expect(bubblewrapArgs({ mounts, isolateNetwork: true }, '/srv/ws', 'x', [])).toContain('--unshare-net');
  });
});

describe('bubblewrapArgs under a root daemon', () => {
  const mounts: Mount[] = [
    { kind: 'ro', source: '/usr', path: '/usr' },
    { kind: 'tmpfs', path: '/tmp', readOnly: false },
    { kind: 'rw', source: '/srv/deep/ws', path: '/srv/deep/ws' },
    { kind: 'ro', source: '/usr/lib/x', path: '/usr/lib/x' },
    { kind: 'tmpfs', path: '/home/u', readOnly: false },
    { kind: 'rw', source: '/var/lib/hrw/agent-state/ws/sessions', path: '/home/u/.agent/sessions' },
  ];
  const drop = { uid: 65532, gid: 65532, setpriv: '/usr/bin/setpriv', bwrap: '/usr/bin/bwrap' };
  const args = bubblewrapArgs({ mounts, isolateNetwork: false, drop }, '/srv/deep/ws', 'claude', ['-p'], (path) => path === '/proc/sys');
  const inner = args.indexOf('/usr/bin/bwrap');

  it('the view is set up as root with no user namespace, keeping only the right to change uid', () => {
    expect(args.slice(0, inner)).not.toContain('--unshare-user');
    expect(at(args, '--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID')).toBeGreaterThan(-1);
  });

  it('then setpriv becomes the sandbox user for good, and an inner bubblewrap gives it a user namespace with none inside', () => {
    const setpriv = args.indexOf('/usr/bin/setpriv');
    expect(args.slice(setpriv, inner)).toEqual([
      '/usr/bin/setpriv',
      '--reuid=65532',
      '--regid=65532',
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
    ]);
    const rest = args.slice(inner);
    for (const flag of ['--unshare-user', '--disable-userns']) expect(rest).toContain(flag);
    expect(at(rest, '--ro-bind', '/proc/sys', '/proc/sys')).toBeGreaterThan(-1);
    expect(at(rest, '--cap-drop', 'ALL')).toBeGreaterThan(-1);
    expect(rest.slice(-5)).toEqual(['--chdir', '/srv/deep/ws', '--', 'claude', '-p']);
  });

  it('folders made on the way are readable by that user, open inside HOME and /tmp; none is made inside a host folder', () => {
    expect(at(args, '--perms', '0755', '--dir', '/srv')).toBeGreaterThan(-1);
    expect(at(args, '--perms', '0755', '--dir', '/srv/deep')).toBeGreaterThan(-1);
    expect(at(args, '--perms', '1777', '--dir', '/home/u/.agent')).toBeGreaterThan(-1);
    expect(at(args, '--perms', '1777', '--tmpfs', '/home/u')).toBeGreaterThan(-1);
    expect(at(args, '--perms', '1777', '--tmpfs', '/tmp')).toBeGreaterThan(-1);
    expect(args).not.toContain('/usr/lib');
    expect(at(args, '--perms', '0755', '--dir', '/srv')).toBeLessThan(at(args, '--bind', '/srv/deep/ws', '/srv/deep/ws'));
  });
});

describe('what runs the agent, and what stays hidden', () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));
  const setUp = () => {
    root = mkdtempSync(join(tmpdir(), 'hrw-view-'));
    for (const dir of ['home/.local/bin', 'project/node_modules/.bin', 'project/node_modules/cli', 'data', 'tools/bin'])
      mkdirSync(join(root, dir), { recursive: true });
    writeFileSync(join(root, 'project/node_modules/cli/run.js'), '');
    return root;
  };

  it('a PATH folder is shown read-only; an npm .bin folder as its whole node_modules; never one that holds HOME or a hidden path', () => {
    setUp();
    const path = [join(root, 'project/node_modules/.bin'), join(root, 'home/.local/bin'), root, join(root, 'home'), '/', join(root, 'tools/bin')].join(':');
    const mounts = installMounts({
      env: { PATH: path, HOME: join(root, 'home') },
      command: 'nothing-by-this-name',
      readable: [],
      guarded: [join(root, 'data'), join(root, 'home')],
      shown: ['/usr'],
    });
    const shown = mounts.map((m) => m.path);
    expect(shown).toContain(join(root, 'project/node_modules'));
    expect(shown).toContain(join(root, 'home/.local/bin'));
    expect(shown).toContain(join(root, 'tools/bin'));
    // The folder holding the data directory, HOME itself and / are left out.
    for (const left of [root, join(root, 'home'), '/']) expect(shown).not.toContain(left);
    expect(mounts.every((m) => m.kind === 'ro')).toBe(true);
  });

  it('a hidden path is covered only where a mount would show it', () => {
    setUp();
    const mounts: Mount[] = [{ kind: 'rw', source: join(root, 'project'), path: join(root, 'project') }];
    const hidden = hiddenMounts([join(root, 'project/node_modules'), join(root, 'data'), join(root, 'missing')], mounts);
    expect(hidden).toEqual([{ kind: 'hide', path: join(root, 'project/node_modules'), folder: true }]);
  });
});

describe('the agent home of a sandboxed run', () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('state from the workspace’s own folder; the operator’s configuration read-only; configuration a run planted is removed', () => {
    root = mkdtempSync(join(tmpdir(), 'hrw-home-'));
    const home = join(root, 'home');
    mkdirSync(join(home, '.agent'), { recursive: true });
    writeFileSync(join(home, '.agent', 'settings.json'), '{"operator":true}');
    // What an earlier run of this workspace planted in its state: a hook the operator does not have.
    const own = join(root, 'state', 'ws', '.agent');
    mkdirSync(join(own, 'hooks'), { recursive: true });
    writeFileSync(join(own, 'hooks', 'evil.sh'), 'echo planted');
    writeFileSync(join(own, 'session.jsonl'), 'kept');
    const mounts = agentHomeMounts(join(root, 'state'), {
      workspaceId: 'ws',
      state: ['.agent', 'agent.json', '../escape'],
      config: ['.agent/settings.json', '.agent/hooks'],
      env: { HOME: home },
    });
    expect(mounts).toEqual([
      { kind: 'rw', source: own, path: join(home, '.agent') },
      { kind: 'rw', source: join(root, 'state', 'ws', 'agent.json'), path: join(home, 'agent.json') },
      { kind: 'ro', source: join(home, '.agent', 'settings.json'), path: join(home, '.agent', 'settings.json') },
    ]);
    expect(readFileSync(join(root, 'state', 'ws', 'agent.json'), 'utf8')).toBe('{}\n');
    expect(() => readFileSync(join(own, 'hooks', 'evil.sh'))).toThrow();
    expect(readFileSync(join(own, 'session.jsonl'), 'utf8')).toBe('kept');
  });

  it('places entries as the CLIs do: XDG variables, CODEX_HOME, a named variable', () => {
    const env = { HOME: '/h', XDG_CONFIG_HOME: '/x/config', CODEX_HOME: '/c' };
    expect(placeOf('.config/opencode', env)).toBe('/x/config/opencode');
    expect(placeOf('.codex/config.toml', env)).toBe('/c/config.toml');
    expect(placeOf('$CODEX_HOME/auth.json', env)).toBe('/c/auth.json');
    expect(placeOf('.local/share/goose', env)).toBe('/h/.local/share/goose');
    expect(placeOf('$UNSET/x', env)).toBeUndefined();
  });
});
