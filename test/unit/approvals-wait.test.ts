import { describe, expect, it } from 'vitest';
import { Approvals } from '../../src/core/approvals/approvals';
import type { Fleet } from '../../src/core/fleet/fleet';
import { keyvStore } from '../../src/core/store/keyv-store';
import { createMemoryKeyv } from '../../src/core/store/keyvs';

/** Two instances on one store: A's run asks, a caller answers on B, and B tells A through the fleet. */
async function twoInstances() {
  const store = keyvStore(createMemoryKeyv());
  const log = () => undefined;
  let a: Approvals | undefined;
  // B's word reaches A at once, as the fleet's notification does.
  const fleet = {
    ask: async (_owner: string, request: { id: string }) => {
      await a?.wake(request.id);
      return { ok: true };
    },
  } as unknown as Fleet;
  a = new Approvals({ store, fleet, instanceId: 'boot_a', log });
  const b = new Approvals({ store, fleet, instanceId: 'boot_b', log });
  await Promise.all([a.load(), b.load()]);
  return { a, b };
}

const DAY = 86_400_000;
const question = { title: 'write fleet.txt', kind: 'edit', paths: ['fleet.txt'], canAlways: false };
const run = { taskId: 'run_1', resumeId: 'res_1', workspaceId: 'ws', agent: 'gemini-acp' };
/** What the wait gives within 30 s, or that it gave nothing (the question waits a day). */
const within = <T>(promise: Promise<T>) => Promise.race([promise, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), 30_000).unref())]);

describe('a question answered on another instance', () => {
  it('reaches its run when the answer comes while the run waits', async () => {
    const { a, b } = await twoInstances();
    const approval = await a.open(run, question, { timeoutMs: DAY, fallback: 'deny' });
    const waiting = a.wait(approval);
    await b.answer(approval.id, { decision: 'allow', scope: 'once' });
    expect(await within(waiting)).toMatchObject({ decision: 'allow', by: 'caller' });
  });

  it('reaches its run when the answer came between the question being stored and the run starting to wait', async () => {
    const { a, b } = await twoInstances();
    const approval = await a.open(run, question, { timeoutMs: DAY, fallback: 'deny' });
    // Listed as soon as it is stored, and answered before A's run waits on it: the wake finds no waiter.
    await b.answer(approval.id, { decision: 'allow', scope: 'once' });
    expect(await within(a.wait(approval))).toMatchObject({ decision: 'allow', by: 'caller' });
  });
});
