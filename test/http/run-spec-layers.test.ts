import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost } from '../helpers/harness';

/** docs/http-api.md, The run spec: a start over its workspace's `run`, tightening what confines or caps, never loosening it. */

afterEach(() => closeAllHosts());

const confined = { id: 'ws', path: tmpdir(), agents: ['fake'], run: { permissions: 'read-only' as const, maxCostUsd: 1, stallTimeoutMs: 60_000, title: 'ws' } };

describe('a start over its workspace’s run spec', () => {
  it('that would loosen what confines or caps it is 403 policy_loosened, naming the field; no run is made', async () => {
    const host = await createTestHost({ workspaces: [confined] });
    for (const [field, value] of [
      ['permissions', 'full'],
      ['permissions', 'ask'],
      ['maxCostUsd', 2],
      ['stallTimeoutMs', 120_000],
    ] as const) {
      const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', [field]: value } });
      expect(res.status).toBe(403);
      const problem = (await res.json()) as { code: string; detail: string };
      expect(problem.code).toBe('policy_loosened');
      expect(problem.detail).toContain(`Field "${field}" cannot be loosened`);
    }
    expect(host.spawner.count).toBe(0);
    const list = (await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: unknown[] };
    expect(list.runs).toEqual([]);
  });

  it('that tightens is taken: its record keeps the resolved spec, and the fields it has always shown agree', async () => {
    const host = await createTestHost({ workspaces: [{ ...confined, run: { ...confined.run, permissions: 'full' as const } }] });
    const res = await host.request('POST', '/api/workspaces/ws/headless', {
      json: { prompt: 'echo x', agent: 'fake', maxCostUsd: 0.5, maxTurns: 3, title: 'mine', timeoutMs: 60_000, wait: true },
    });
    const record = (await res.json()) as Record<string, any>;
    expect(record.status).toBe('succeeded');
    expect(record.spec).toEqual({
      agent: 'fake',
      title: 'mine',
      maxCostUsd: 0.5,
      maxTurns: 3,
      stallTimeoutMs: 60_000,
      timeoutMs: 60_000,
      permissions: 'full',
      sandbox: false,
      isolation: 'none',
    });
    expect(record).toMatchObject({ title: 'mine', timeoutMs: 60_000, budget: { maxCostUsd: 0.5, maxTurns: 3 } });
    expect(record).not.toHaveProperty('policy');
  });

  it('a library workspace in the shape before the spec is refused at start, naming where each key went', async () => {
    await expect(createTestHost({ workspaces: [{ id: 'ws', path: tmpdir(), sandbox: true } as never] })).rejects.toThrow(
      'workspace "ws": "sandbox" has moved into the run spec: write it as "run": { "sandbox": … }',
    );
    await expect(createTestHost({ workspaces: [{ id: 'ws', path: tmpdir(), worktree: { ref: 'main' } } as never] })).rejects.toThrow(
      'workspace "ws": worktree.ref has moved into the run spec',
    );
  });

  it('a start’s checks on a read-only or asking workspace without a sandbox are refused: a check runs any command', async () => {
    const host = await createTestHost({ workspaces: [confined, { id: 'ask', path: tmpdir(), agents: ['fake'], run: { permissions: 'ask' as const } }] });
    for (const ws of ['ws', 'ask']) {
      const res = await host.request('POST', `/api/workspaces/${ws}/headless`, {
        json: { prompt: 'echo x', agent: 'fake', verify: { checks: [{ name: 'c', command: 'touch /tmp/anything' }] } },
      });
      const problem = (await res.json()) as { code: string; detail: string };
      expect(res.status, ws).toBe(403);
      expect(problem).toMatchObject({ code: 'policy_loosened' });
      expect(problem.detail).toContain('Field "verify" cannot be loosened');
    }
    expect(host.spawner.count).toBe(0);
  });

  it('the installation’s guards are a ceiling too: a start may lower them, never raise them', async () => {
    const host = await createTestHost({ maxMemoryMb: 500, stallTimeoutMs: 60_000, workspaces: [{ id: 'ws', path: tmpdir(), agents: ['fake'] }] });
    for (const [field, value] of [
      ['maxMemoryMb', 100_000],
      ['stallTimeoutMs', 1_800_000],
    ] as const) {
      const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', [field]: value } });
      expect(await res.json()).toMatchObject({ status: 403, code: 'policy_loosened' });
    }
    const lower = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', maxMemoryMb: 400, wait: true } });
    expect(((await lower.json()) as { spec: Record<string, unknown> }).spec).toMatchObject({ maxMemoryMb: 400, stallTimeoutMs: 60_000 });
  });
});
