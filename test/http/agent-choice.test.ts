import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { diagnoseWorkspace } from '../../src/core/agents/doctor';
import { AgentRegistry } from '../../src/core/agents/registry';
import { closeAllHosts, createTestHost, fakeAgent } from '../helpers/harness';

/** docs/http-api.md, Agent selection: the agent a start gets without naming one is never invisible. */

const dir = mkdtempSync(join(tmpdir(), 'hrw-choice-'));
afterEach(() => closeAllHosts());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const agents = { fake: fakeAgent, other: fakeAgent };

describe('which rule chose a run’s agent', () => {
  it('is on its record: named, first installed, the most recent, its Session’s, the workspace’s headlessAgent', async () => {
    const host = await createTestHost({ workspaces: [{ id: 'ws', path: dir }], agents });
    const chosen = async (body: Record<string, unknown>) => {
      const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'session s-choice; echo x', wait: true, ...body } });
      const record = (await res.json()) as Record<string, any>;
      expect(res.status, JSON.stringify(record)).toBe(200);
      return [record.agent, record.agentChosenBy, record.resumeId];
    };
    const [firstAgent, rule] = await chosen({});
    expect(rule).toBe('first');
    expect(await chosen({ agent: 'other' })).toEqual(['other', 'asked', expect.any(String)]);
    const [, recent, resumeId] = await chosen({});
    expect(recent).toBe('recent');
    expect(firstAgent).toBe('fake');
    const resumed = await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo again', resumeId } });
    const { taskId } = (await resumed.json()) as { taskId: string };
    expect(await host.waitEnded(taskId)).toMatchObject({ agent: 'other', agentChosenBy: 'session' });
    const fixed = await createTestHost({ workspaces: [{ id: 'ws', path: dir, headlessAgent: 'fake' }], agents });
    const res = await fixed.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', wait: true } });
    expect(await res.json()).toMatchObject({ agent: 'fake', agentChosenBy: 'headlessAgent' });
  });

  it('doctor (and GET /api/agents) warns of a workspace with no fixed agent and more than one that can run', async () => {
    const registry = new AgentRegistry(agents);
    const open = await diagnoseWorkspace({ registry, workspace: { id: 'open', path: dir, agents: ['fake', 'other'] }, baseEnv: process.env });
    expect(open.warnings).toEqual([expect.stringContaining('it has no headlessAgent: a start that names no agent gets the one it ran last (of fake, other)')]);
    const fixed = await diagnoseWorkspace({
      registry,
      workspace: { id: 'fixed', path: dir, agents: ['fake', 'other'], headlessAgent: 'fake' },
      baseEnv: process.env,
    });
    expect(fixed.warnings).toEqual([]);
    const single = await diagnoseWorkspace({ registry, workspace: { id: 'single', path: dir, agents: ['fake'] }, baseEnv: process.env });
    expect(single.warnings).toEqual([]);
  });
});
