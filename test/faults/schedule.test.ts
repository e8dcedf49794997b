import { afterEach, describe, expect, it } from 'vitest';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { type Write, faultyKeyv, kindOf, refusingFirst } from '../helpers/faulty-store';
import { waitFor } from '../helpers/wait';

/**
 * The fault-injection tier over schedules: each kind of write a firing makes (its idempotency
 * key, Session, run record, the schedule's state) is refused in turn, once and with every write
 * after it (the service dies there). After a restart (with `missed: "once"`, which fires again the
 * latest occurrence it may not have recorded): no occurrence ever has two runs, every run it made
 * ends, and the schedule goes on firing.
 */

afterEach(closeAllHosts);

const SCHEDULE = { name: 'tick', cron: '* * * * * *', workspace: 'ws', run: { agent: 'fake' }, prompt: 'echo tick', missed: 'once' as const };
const hostOn = (store: ReturnType<typeof faultyKeyv>) => createTestHost({ store: store.keyv(), schedules: [SCHEDULE] });
type Json = Record<string, any>;
const runs = async (host: TestHost): Promise<Json[]> =>
  ((await (await host.request('GET', '/api/headless?wsId=ws&schedule=tick&limit=500')).json()) as { runs: Json[] }).runs;

/** The writes of a firing, by kind (the run's first write is the `running` record of a scheduled run). */
const KIND: Record<string, (w: Write) => boolean> = {
  'idem pending': (w) => kindOf(w) === 'idem pending',
  session: (w) => kindOf(w) === 'session',
  'run running': (w) => kindOf(w) === 'run running' && (w.value?.source as { name?: string } | undefined)?.name === 'tick',
  schedule: (w) => w.key.startsWith('schedule:'),
};

describe('a firing’s writes', () => {
  it('are the ones this tier refuses', async () => {
    const store = faultyKeyv();
    const host = await hostOn(store);
    await waitFor(async () => (await runs(host)).length >= 1, { timeoutMs: 240_000, what: 'a firing' });
    await host.close();
    for (const [kind, is] of Object.entries(KIND)) expect(store.state.writes.some(is), kind).toBe(true);
  });
});

describe.each([
  ['once', false],
  ['and every write after it (a crash there)', true],
])('each firing write refused %s', (_, crash) => {
  it.each(Object.keys(KIND))('%s', async (kind) => {
    const store = faultyKeyv();
    store.state.refuse = refusingFirst(KIND[kind]!, crash);
    const first = await hostOn(store);
    await waitFor(async () => store.state.refused.length > 0, { timeoutMs: 240_000, what: `a write of kind "${kind}"` });
    await first.close();
    store.state.refuse = undefined;
    const again = await hostOn(store);
    const before = (await runs(again)).length;
    await waitFor(async () => (await runs(again)).length >= before + 2, { timeoutMs: 240_000, what: 'the schedule to go on' });
    const all = await runs(again);
    expect(new Set(all.map((r) => r.scheduledFor)).size).toBe(all.length);
    for (const r of all) expect(['queued', 'running'].includes((await again.waitEnded(r.taskId, 30_000)).status as string)).toBe(false);
  });
});
