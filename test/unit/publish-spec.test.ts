import { describe, expect, it } from 'vitest';
import { resolveSpec } from '../../src/core/runs/run-spec';
import { checkOriginsPublish, publishUnavailable } from '../../src/core/worktrees/publish-settings';

/** docs/worktrees.md: Publishing: what a start may ask of publishing, over its operator's layers. */
describe("a start's publish", () => {
  const worktree = { isolation: 'worktree' };

  it('asks no more than its workspace, schedule or trigger does: no push, pull request or ready one they do not ask', () => {
    expect(resolveSpec({ workspace: worktree, request: { publish: {} } })).toMatchObject({ refused: { field: 'publish.push' } });
    const pushes = { ...worktree, publish: { push: true } };
    expect(resolveSpec({ workspace: pushes, request: { publish: { pullRequest: {} } } })).toMatchObject({ refused: { field: 'publish.pullRequest' } });
    const drafts = { ...worktree, publish: { pullRequest: {} } };
    expect(resolveSpec({ origin: drafts, request: { publish: { pullRequest: { draft: false } } } })).toMatchObject({
      refused: { field: 'publish.pullRequest.draft' },
    });
  });

  it('may ask less, or set its title, merged field by field over what its operator asked', () => {
    const operator = { ...worktree, publish: { pullRequest: { draft: false, base: 'release' } } };
    expect(resolveSpec({ workspace: operator, request: { publish: { pullRequest: { title: 'Mine', draft: true } } } })).toMatchObject({
      spec: { publish: { pullRequest: { draft: true, base: 'release', title: 'Mine' } } },
    });
    expect(resolveSpec({ workspace: operator, request: { publish: { push: false } } })).toMatchObject({ spec: { publish: { push: false } } });
  });

  it("asks anything where its workspace's publishTo.fromStarts allows it", () => {
    const asked = { publish: { pullRequest: { draft: false } } };
    expect(resolveSpec({ workspace: worktree, request: asked, publishFromStarts: true })).toMatchObject({ spec: asked });
  });

  it('is refused where its workspace has no publish settings, no forge, or the run no worktree', () => {
    const ws = { id: 'ws', path: '/srv/ws' };
    const remote = { remote: '/srv/remote.git' };
    expect(publishUnavailable(ws, { publish: {}, isolation: 'worktree' })).toMatch(/no publishTo/);
    expect(publishUnavailable({ ...ws, publishTo: remote }, { publish: { pullRequest: {} }, isolation: 'worktree' })).toMatch(/no publishTo.forge/);
    expect(publishUnavailable({ ...ws, publishTo: remote }, { publish: {}, isolation: 'none' })).toMatch(/only a run in a worktree/);
    expect(publishUnavailable({ ...ws, publishTo: remote }, { publish: { push: false }, isolation: 'none' })).toBeUndefined();
    expect(publishUnavailable({ ...ws, publishTo: remote }, { publish: {}, isolation: 'worktree' })).toBeUndefined();
  });

  it('a schedule’s or trigger’s run.publish is checked against its workspace when the config loads, not first when it fires', () => {
    const listed = [
      { id: 'ws', path: '/srv/ws', run: { isolation: 'worktree' as const } },
      { id: 'pub', path: '/srv/pub', publishTo: { remote: '/srv/r.git' } },
    ];
    expect(() => checkOriginsPublish([{ where: 'schedule "nightly"', workspace: 'ws', run: { publish: {} } }], listed)).toThrow(
      'schedule "nightly": run.publish cannot be: workspace "ws" has no publishTo',
    );
    expect(() => checkOriginsPublish([{ where: 'trigger "gh"', workspace: 'pub', run: { publish: {} } }], listed)).toThrow(/only a run in a worktree/);
    expect(() => checkOriginsPublish([{ where: 'trigger "gh"', workspace: 'pub', run: { publish: {}, isolation: 'worktree' } }], listed)).not.toThrow();
  });
});
