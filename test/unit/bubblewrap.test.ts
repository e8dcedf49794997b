import { describe, expect, it } from 'vitest';
import { bubblewrapArgs } from '../../src/core/sandbox/bubblewrap';
import { runPolicy } from '../../src/core/sandbox/policy';

describe('bubblewrapArgs', () => {
  const layout = {
    workspace: '/srv/ws',
    readOnly: false,
    isolateNetwork: false,
    fresh: { folders: ['/run'], files: ['/run/systemd/resolve/stub-resolv.conf'] },
    dropCapabilities: false,
    writable: ['/home/u/.claude', '/tmp/hrw-sandbox-1'],
    hidden: [
      { path: '/srv', folder: true },
      { path: '/srv/ws/.headless', folder: true },
      { path: '/etc/headless/token', folder: false },
    ],
  };

  it('mounts everything read-only, hides, binds the workspace and state over, then hides again what lies inside them', () => {
    const args = bubblewrapArgs(layout, '/srv/ws', 'claude', ['-p']);
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));
    expect(args.slice(0, 3)).toEqual(['--ro-bind', '/', '/']);
    // The parent of the workspace (another workspace, say) is hidden before the workspace is bound
    // over it, and made read-only once the bind's mount point is made in it.
    expect(at('--tmpfs', '/srv')).toBeLessThan(at('--bind', '/srv/ws', '/srv/ws'));
    expect(at('--remount-ro', '/srv')).toBeGreaterThan(at('--bind', '/tmp/hrw-sandbox-1', '/tmp/hrw-sandbox-1'));
    // The data directory inside the workspace is hidden after the workspace is bound.
    expect(args.lastIndexOf('/srv/ws/.headless')).toBeGreaterThan(at('--bind', '/srv/ws', '/srv/ws'));
    expect(at('--ro-bind', '/dev/null', '/etc/headless/token')).toBeGreaterThan(0);
    expect(at('--bind', '/home/u/.claude', '/home/u/.claude')).toBeGreaterThan(0);
    expect(at('--unshare-pid')).toBeGreaterThan(0);
    expect(args.slice(-5)).toEqual(['--chdir', '/srv/ws', '--', 'claude', '-p']);
  });

  it('the host’s service sockets: an empty /run of its own, the resolver file bound back, before anything is hidden', () => {
    const args = bubblewrapArgs(layout, '/srv/ws', 'x', []);
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));
    expect(at('--tmpfs', '/run')).toBeGreaterThan(at('--proc', '/proc'));
    expect(at('--ro-bind', '/run/systemd/resolve/stub-resolv.conf', '/run/systemd/resolve/stub-resolv.conf')).toBeGreaterThan(at('--tmpfs', '/run'));
    expect(at('--tmpfs', '/run')).toBeLessThan(at('--tmpfs', '/srv'));
    expect(at('--remount-ro', '/run')).toBeGreaterThan(at('--ro-bind', '/run/systemd/resolve/stub-resolv.conf', '/run/systemd/resolve/stub-resolv.conf'));
  });

  it('started by root: every capability dropped; otherwise bubblewrap has none to give', () => {
    expect(bubblewrapArgs(layout, '/srv/ws', 'x', [])).not.toContain('--cap-drop');
    expect(bubblewrapArgs({ ...layout, dropCapabilities: true }, '/srv/ws', 'x', []).join(' ')).toContain('--cap-drop ALL');
  });

  it('a limited network: a network namespace of its own', () => {
    expect(bubblewrapArgs(layout, '/srv/ws', 'x', [])).not.toContain('--unshare-net');
    expect(bubblewrapArgs({ ...layout, isolateNetwork: true }, '/srv/ws', 'x', [])).toContain('--unshare-net');
  });

  it('read-only: the workspace is bound read-only', () => {
    const args = bubblewrapArgs({ ...layout, readOnly: true }, '/srv/ws', 'x', []);
    expect(args.join(' ')).toContain('--ro-bind /srv/ws /srv/ws');
    expect(args.join(' ')).not.toContain('--bind /srv/ws /srv/ws');
  });
});

describe('runPolicy', () => {
  it('the schedule’s settings over the workspace’s; none when unconfined', () => {
    expect(runPolicy({})).toBeUndefined();
    expect(runPolicy({ permissions: 'read-only' })).toEqual({ permissions: 'read-only', sandbox: false });
    expect(runPolicy({ sandbox: true }, { permissions: 'read-only' })).toEqual({ permissions: 'read-only', sandbox: true });
    expect(runPolicy({ sandbox: true, permissions: 'read-only' }, { sandbox: false, permissions: 'full' })).toBeUndefined();
  });
});
