import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { noneMarked } from '../helpers/processes';
import { type Received, closeReceivers, startReceiver } from '../helpers/receiver';
import { sleep, waitFor } from '../helpers/wait';

/**
 * A fleet of three on PostgreSQL while the database goes away: for less time than a lease (no
 * instance may lose what it runs), and for longer (instances lose their leases; what they ran is
 * taken over). Either way every acknowledged run ends once, as its webhooks and timeline say.
 */

const SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
// The short outage is PostgreSQL's stop, until every member's renewal has met it (a tick every
// third of the lease: at most 5 s), and its start, then a renewal: some 7 s here, more on a loaded
// machine. A lease of 15 s keeps it inside (at 6 s, a slow start cost two runs).
const LEASE_S = 15;
const RENEWAL_FAILED = 'the fleet could not renew its lease or sweep';
const dirs: string[] = [];
let postgres: TestPostgres;
let fleet: Daemon[];
let worker: Daemon;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const seen = new Set<string>();

beforeAll(async () => {
  postgres = await startPostgres();
  // Every first attempt of a delivery is refused; a retry is taken.
  receiver = await startReceiver((_, r) => {
    const id = r.headers['webhook-id']!;
    if (seen.has(id)) return 200;
    seen.add(id);
    return 500;
  });
  const env = { HEADLESS_STORE_URL: await postgres.database(), HEADLESS_WEBHOOK_SECRET: SECRET };
  const daemon = () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, {
      instanceLeaseSeconds: LEASE_S,
      webhooks: { allowPrivateTargets: true, retryDelaysMs: [300, 600, 1000, 1000, 1000, 1000] },
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'], webhook: { url: receiver.url } }],
    });
    return startDaemon(dir, undefined, env);
  };
  fleet = await Promise.all([daemon(), daemon(), daemon()]);
  // A worker with a workspace of its own: the members place its runs through the fleet's queue.
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir, { instanceLeaseSeconds: LEASE_S, workspaces: [{ id: 'placed', path: '.', agents: ['fake'] }] });
  worker = await startDaemon(dir, ['worker', '--port', '0'], env);
}, 600_000);

afterAll(async () => {
  cleanupDaemons(dirs);
  await closeReceivers();
  await postgres?.stop();
});

/** Starts `prompt` on each member; the taskIds it acknowledged. */
async function startOnEach(prompt: string): Promise<string[]> {
  const ids: string[] = [];
  for (const d of fleet) {
    const res = await api(d, 'POST', '/api/workspaces/ws/headless', { prompt, agent: 'fake' }).catch(() => undefined);
    if (res?.status === 202) ids.push(((await res.json()) as { taskId: string }).taskId);
    else await res?.body?.cancel();
  }
  return ids;
}

/** Every run ended, once in the list under its status, its timeline and its webhook saying the same. */
async function checkEnded(taskIds: string[]): Promise<Map<string, string>> {
  const d = fleet[0]!;
  const statuses = new Map<string, string>();
  await waitFor(
    async () => {
      for (const id of taskIds) {
        if (statuses.has(id)) continue;
        const res = await api(d, 'GET', `/api/headless/${id}`);
        const record = res.status === 200 ? ((await res.json()) as { status: string }) : undefined;
        if (record && record.status !== 'running') statuses.set(id, record.status);
      }
      return statuses.size === taskIds.length;
    },
    { timeoutMs: 240_000, intervalMs: 250, what: 'every acknowledged run to end' },
  );
  const listed = ((await (await api(d, 'GET', '/api/headless?wsId=ws&limit=500')).json()) as { runs: Array<{ taskId: string; status: string }> }).runs;
  for (const [id, status] of statuses) {
    expect(listed.filter((r) => r.taskId === id)).toEqual([expect.objectContaining({ status })]);
    const events = ((await (await api(d, 'GET', `/api/headless/${id}/events?format=json&limit=1000`)).json()) as { events: Array<{ type: string; data: any }> })
      .events;
    expect(events.at(-1), id).toMatchObject({ type: 'run.ended', data: { status } });
  }
  const ended = (r: Received) => JSON.parse(r.body) as { type: string; data: { taskId: string; status: string } };
  await waitFor(() => taskIds.every((id) => receiver.received.filter((r) => ended(r).data.taskId === id && ended(r).type === 'run.ended').length >= 2), {
    timeoutMs: 240_000,
    intervalMs: 250,
    what: 'every run.ended webhook to be taken',
  });
  for (const r of receiver.received.map(ended))
    if (r.type === 'run.ended' && statuses.has(r.data.taskId)) expect(r.data.status).toBe(statuses.get(r.data.taskId));
  return statuses;
}

describe('PostgreSQL outages under a fleet of three', () => {
  it(`shorter than the lease (${LEASE_S} s): nothing is interrupted, and runs accepted after it are not either`, async () => {
    const before = await startOnEach('sleep 5000; echo done');
    expect(before).toHaveLength(3);
    const failedRenewals = () => fleet.map((d) => d.output().split(RENEWAL_FAILED).length);
    const earlier = failedRenewals();
    await postgres.pause();
    // Meanwhile the store is unreachable: answered 503, never a crash.
    const during = await api(fleet[1]!, 'GET', `/api/headless?wsId=ws`);
    expect(during.status).toBe(503);
    await during.body?.cancel();
    // Not a fixed time: an outage between two renewals would check nothing.
    await waitFor(() => failedRenewals().every((n, i) => n > earlier[i]!), { timeoutMs: LEASE_S * 1000, what: "every member's renewal to meet the outage" });
    await postgres.resume();
    const after = await startOnEach('sleep 1500; echo done');
    expect(after).toHaveLength(3);
    const statuses = await checkEnded([...before, ...after]);
    expect([...statuses.values()]).toEqual(Array(6).fill('succeeded'));
  });

  it(`longer than the lease: what the members ran is interrupted, consistently, and they serve again after`, async () => {
    const before = await startOnEach('sleep 30000');
    expect(before).toHaveLength(3);
    await postgres.pause();
    await sleep((LEASE_S + 3) * 1000);
    // A load balancer would take them out: their lease has run out and the store does not answer.
    for (const member of fleet) {
      const ready = await api(member, 'GET', '/readyz');
      expect([ready.status, ((await ready.json()) as { code: string }).code]).toEqual([503, 'not_ready']);
    }
    await postgres.resume();
    const statuses = await checkEnded(before);
    expect([...statuses.values()]).toEqual(Array(3).fill('interrupted'));
    expect(await noneMarked(before)).toBe(true);
    // Each member has its lease again and runs what it is given.
    await waitFor(async () => (await startOnEach('echo back')).length === 3, { timeoutMs: 240_000, intervalMs: 500, what: 'every member to start runs again' });
    const ready = async () => (await Promise.all(fleet.map(async (member) => (await api(member, 'GET', '/readyz')).status))).every((status) => status === 200);
    await waitFor(ready, { timeoutMs: 240_000, intervalMs: 500, what: 'every member to be ready again' });
    // The fleet's queue (pg-boss) came back with the database: a start for the worker's workspace,
    // sent to a member that lacks it, is placed and run there.
    const placed = await api(fleet[0]!, 'POST', '/api/workspaces/placed/headless', { prompt: 'echo placed', agent: 'fake' });
    expect(placed.status).toBe(202);
    const { taskId } = (await placed.json()) as { taskId: string };
    await waitFor(async () => ((await (await api(fleet[1]!, 'GET', `/api/headless/${taskId}`)).json()) as { status: string }).status === 'succeeded', {
      timeoutMs: 240_000,
      intervalMs: 250,
      what: 'the worker to run the placed run',
    });
    expect(worker.output()).toContain(taskId);
  });
});
