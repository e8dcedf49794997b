import { describe, expect, it } from 'vitest';
import { localHost } from '../../src/core/process/local-host';
import type { ProcessHost } from '../../src/core/process/process-host';
import { type PlacementProvider, inWorkspace } from '../../src/core/runs/placement';
import { Placements, placementOf } from '../../src/core/runs/placements';
import type { PlacementRecord, WorktreeRecord } from '../../src/core/types';

const worktree: WorktreeRecord = { repo: '/r', path: '/wt/ws/ses_1', branch: 'headless/ses_1', base: 'abc', created: true, cleanup: 'if-unchanged' };

/** A provider that keeps the placements it was asked to settle and release. */
function recording(name: string, host: ProcessHost = localHost) {
  const seen: PlacementRecord[] = [];
  const provider: PlacementProvider = {
    ...inWorkspace,
    name,
    host,
    settle: async ({ placement }) => void seen.push(placement),
    release: async ({ placement }) => void seen.push(placement),
  };
  return { provider, seen };
}

describe('recorded placements', () => {
  it('reads records written before providers were named: { cwd } is the workspace folder, { cwd, worktree } the worktree provider with its record as data', () => {
    expect(placementOf({ cwd: '/w' })).toEqual({ provider: 'none', cwd: '/w' });
    expect(placementOf({ cwd: '/wt/ws/ses_1', worktree })).toEqual({ provider: 'worktree', cwd: '/wt/ws/ses_1', data: worktree });
    expect(placementOf({ provider: 'copy', cwd: '/c', data: { folder: '/c' } })).toEqual({ provider: 'copy', cwd: '/c', data: { folder: '/c' } });
  });

  it('an earlier worktree record is settled and released by the worktree provider, with its record as data', async () => {
    const wt = recording('worktree');
    const placements = new Placements([wt.provider, inWorkspace]);
    await placements.settle({ taskId: 'run_1', placement: { cwd: '/wt/ws/ses_1', worktree } });
    await placements.release({ taskId: 'run_1', workspaceId: 'ws', placement: { cwd: '/wt/ws/ses_1', worktree } });
    expect(wt.seen).toEqual([
      { provider: 'worktree', cwd: '/wt/ws/ses_1', data: worktree },
      { provider: 'worktree', cwd: '/wt/ws/ses_1', data: worktree },
    ]);
  });

  it('a run is answered for by the host of the provider that placed it, or its policy named; an unregistered one by the local host', () => {
    const elsewhere: ProcessHost = { ...localHost, machine: 'elsewhere' };
    const copy = recording('copy', elsewhere);
    const placements = new Placements([copy.provider, recording('worktree').provider, inWorkspace]);
    expect(placements.hostOf({ placement: { provider: 'copy', cwd: '/c' } })).toBe(elsewhere);
    expect(placements.hostOf({ policy: { permissions: 'full', sandbox: false, isolation: 'copy' } })).toBe(elsewhere);
    expect(placements.hostOf({ placement: { provider: 'gone', cwd: '/c' } })).toBe(localHost);
    expect(placements.hostOf({})).toBe(localHost);
  });

  it('the first provider of a name wins: one of the handler’s own takes the built-in’s place', async () => {
    const own = recording('none');
    const placements = new Placements([own.provider, inWorkspace]);
    await placements.release({ taskId: 'run_1', workspaceId: 'ws', placement: { cwd: '/w' } });
    expect(own.seen).toEqual([{ provider: 'none', cwd: '/w' }]);
    expect(placements.names()).toEqual(['none']);
  });
});
