import { describe, expect, it } from 'vitest';
import { TIMEOUT_CAP, TIMEOUT_DEFAULT } from '../../src/contract/run-spec';
import { checkSpecLayer, policyOf, refuseMovedKeys, resolveSpec } from '../../src/core/runs/run-spec';

/** The run spec resolved once at acceptance (runs/run-spec.ts): the layers, the defaults, and what a start may not loosen. */

const resolved = (layers: Parameters<typeof resolveSpec>[0]) => {
  const decided = resolveSpec(layers);
  if (!('spec' in decided)) throw new Error(`refused: ${decided.refused.detail}`);
  return decided.spec;
};

describe('resolveSpec', () => {
  it('fills the defaults: unconfined, in the workspace folder, five minutes', () => {
    const spec = resolved({});
    expect(spec).toEqual({ timeoutMs: TIMEOUT_DEFAULT, permissions: 'full', sandbox: false, isolation: 'none' });
    expect(policyOf(spec)).toBeUndefined();
  });

  it("the start's fields over its schedule's, over its workspace's; approvals field by field", () => {
    const spec = resolved({
      workspace: { permissions: 'ask', approvals: { timeoutMs: 1000, fallback: 'allow' }, title: 'ws', maxTurns: 50, isolation: 'worktree', ref: 'main' },
      origin: { approvals: { fallback: 'deny' }, title: 'nightly', metadata: { team: 'a' } },
      request: { title: 'mine', maxTurns: 10, ref: 'v2', timeoutMs: 60_000 },
    });
    expect(spec).toMatchObject({ title: 'mine', metadata: { team: 'a' }, maxTurns: 10, ref: 'v2', timeoutMs: 60_000, isolation: 'worktree' });
    expect(spec.approvals).toEqual({ timeoutMs: 1000, fallback: 'deny' });
    expect(policyOf(spec)).toEqual({ permissions: 'ask', approvals: { timeoutMs: 1000, fallback: 'deny' }, sandbox: false, worktree: { ref: 'v2' } });
  });

  it('an operator layer may loosen the one below (a schedule over its workspace); a start only tightens', () => {
    expect(resolved({ workspace: { permissions: 'read-only', sandbox: true }, origin: { permissions: 'full', sandbox: false } })).toMatchObject({
      permissions: 'full',
      sandbox: false,
    });
    expect(resolved({ workspace: { permissions: 'ask' }, request: { permissions: 'read-only', sandbox: true } })).toMatchObject({
      permissions: 'read-only',
      sandbox: true,
    });
    const refused = (layers: Parameters<typeof resolveSpec>[0]) => resolveSpec(layers) as { refused: { field: string } };
    expect(refused({ workspace: { permissions: 'read-only' }, request: { permissions: 'ask' } }).refused.field).toBe('permissions');
    expect(refused({ workspace: { permissions: 'ask' }, request: { permissions: 'full' } }).refused.field).toBe('permissions');
    expect(refused({ origin: { sandbox: true }, request: { sandbox: false } }).refused.field).toBe('sandbox');
    expect(refused({ workspace: { maxCostUsd: 1 }, request: { maxCostUsd: 2 } }).refused.field).toBe('maxCostUsd');
    expect(refused({ workspace: { maxMemoryMb: 512 }, request: { maxMemoryMb: 1024 } }).refused.field).toBe('maxMemoryMb');
    expect(resolved({ workspace: { maxCostUsd: 1, stallTimeoutMs: 60_000 }, request: { maxCostUsd: 0.5, stallTimeoutMs: 1000 } })).toMatchObject({
      maxCostUsd: 0.5,
      stallTimeoutMs: 1000,
    });
  });

  it('the installation’s guards are the lowest layer; an operator’s own checks on a read-only workspace stand, a start’s do not', () => {
    expect(resolved({ installation: { maxMemoryMb: 512 }, workspace: { maxMemoryMb: 2048 } }).maxMemoryMb).toBe(2048);
    expect((resolveSpec({ installation: { maxMemoryMb: 512 }, request: { maxMemoryMb: 1024 } }) as { refused: { field: string } }).refused.field).toBe(
      'maxMemoryMb',
    );
    const checks = [{ name: 'c', command: 'true' }];
    expect(resolved({ workspace: { permissions: 'read-only', verify: { checks } } }).verify).toEqual({ checks });
    expect((resolveSpec({ workspace: { permissions: 'read-only' }, request: { verify: { checks } } }) as { refused: { field: string } }).refused.field).toBe(
      'verify',
    );
    expect(resolved({ workspace: { permissions: 'read-only', sandbox: true }, request: { verify: { checks } } }).verify).toEqual({ checks });
  });

  it('approvals only under ask; a ref only off the workspace folder; a timeout never past the cap', () => {
    expect(resolved({ workspace: { approvals: { timeoutMs: 5 }, ref: 'main' } })).not.toHaveProperty('approvals');
    expect(resolved({ workspace: { ref: 'main' } })).not.toHaveProperty('ref');
    expect(resolved({ workspace: { isolation: 'worktree' } }).ref).toBe('HEAD');
    expect(resolved({ workspace: { timeoutMs: TIMEOUT_CAP * 2 } }).timeoutMs).toBe(TIMEOUT_CAP);
  });
});

describe('a layer of defaults', () => {
  it('is checked by the run spec’s own schema, naming where', () => {
    expect(checkSpecLayer({ permissions: 'ask', maxTurns: 3 }, 'schedule "a"', { agent: true })).toEqual({ permissions: 'ask', maxTurns: 3 });
    expect(() => checkSpecLayer({ permissions: 'none' }, 'schedule "a"', { agent: true })).toThrow('schedule "a": run.permissions is invalid');
    expect(() => checkSpecLayer({ sandbx: true }, 'schedule "a"', { agent: true })).toThrow('schedule "a": unknown key run.sandbx');
    expect(() => checkSpecLayer({ agent: 'claude' }, 'workspace "w"', { agent: false })).toThrow('run.agent is not a workspace default');
    expect(() => checkSpecLayer({ metadata: ['a'] }, 'trigger "t"', { agent: true })).toThrow('run.metadata must be an object');
    expect(() => checkSpecLayer({ outputSchema: { type: 'nope' } }, 'trigger "t"', { agent: true })).toThrow('run.outputSchema is invalid');
  });

  it('set outside `run` (the shape before the spec) is refused, naming where it moved', () => {
    expect(() => refuseMovedKeys({ id: 'w', path: '/w', sandbox: true }, 'workspace "w"')).toThrow(
      'workspace "w": "sandbox" has moved into the run spec: write it as "run": { "sandbox": … }',
    );
    expect(() => refuseMovedKeys({ id: 'w', path: '/w', run: { sandbox: true } }, 'workspace "w"')).not.toThrow();
  });
});
