import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { readToEnd, sseEvents } from '../helpers/events';
import { closeReceivers, startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';
import { type TestPostgres, startPostgres } from '../fixtures/postgres.mjs';

/**
 * Three daemons on loopback sharing one real PostgreSQL (docs/deployment.md: Running several instances):
 * any of them answers for any run, the rules hold across them, and when one dies (kill -9)
 * another takes over what it left.
 */

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const dirs: string[] = [];
let postgres: TestPostgres;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let failing = false;
let fleet: Daemon[];

type Started = { taskId: string; resumeId: string; status: string };
/** Every run an instance acknowledged (202). */
const acknowledged = new Set<string>();

async function start(daemon: Daemon, body: Record<string, unknown>, headers: Record<string, string> = {}, workspace = 'ws') {
  const answer = await api(daemon, 'POST', `/api/workspaces/${workspace}/headless`, { agent: 'fake', ...body }, headers);
  if (answer.status === 202) acknowledged.add(((await answer.clone().json()) as Started).taskId);
  return answer;
}

async function read(daemon: Daemon, taskId: string): Promise<Record<string, any>> {
  return (await api(daemon, 'GET', `/api/headless/${taskId}`)).json() as Promise<Record<string, any>>;
}

function daemonDir(extra: Record<string, unknown> = {}): string {
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir, {
    maxConcurrentRuns: 2,
    // Long enough that a busy machine never lets a live instance's lease run out; a kill -9 waits it out.
    instanceLeaseSeconds: 10,
    webhooks: { allowPrivateTargets: true, retryDelaysMs: [1000, 1000, 1000, 1000, 1000] },
    workspaces: [{ id: 'ws', path: '.', agents: ['fake'], webhook: { url: receiver.url } }],
    ...extra,
  });
  return dir;
}

beforeAll(async () => {
  postgres = await startPostgres();
  receiver = await startReceiver(() => (failing ? 500 : 200));
  const url = await postgres.database();
  const env = { HEADLESS_STORE_URL: url, HEADLESS_WEBHOOK_SECRET: SECRET };
  // The third has a workspace the others lack.
  const onlyC = {
    workspaces: [
      { id: 'ws', path: '.', agents: ['fake'], webhook: { url: receiver.url } },
      { id: 'only-c', path: '.', agents: ['fake'] },
    ],
  };
  fleet = await Promise.all([
    startDaemon(daemonDir(), undefined, env),
    startDaemon(daemonDir(), undefined, env),
    startDaemon(daemonDir(onlyC), undefined, env),
  ]);
}, 600_000);

afterAll(async () => {
  cleanupDaemons(dirs);
  await closeReceivers();
  await postgres?.stop();
});

describe('three daemons on one PostgreSQL', () => {
  it('a run started on A is read and listed on B and C, and its events stream live from B', async () => {
    const [a, b, c] = fleet;
    const started = (await (await start(a!, { prompt: 'session fleet-1; sleep 1500; echo done' })).json()) as Started;
    expect(await read(b!, started.taskId)).toMatchObject({ taskId: started.taskId, status: 'running' });
    const stream = await api(b!, 'GET', `/api/headless/${started.taskId}/events`);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = sseEvents(await readToEnd(stream, 15_000)).map((e) => e.parsed);
    expect(events.map((e) => e.type)).toEqual(['run.started', 'agent.session', 'run.ended']);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(events.at(-1)!.data).toMatchObject({ taskId: started.taskId, status: 'succeeded' });
    const list = (await (await api(c!, 'GET', '/api/headless?wsId=ws')).json()) as { runs: Array<{ taskId: string; status: string }> };
    expect(list.runs.find((r) => r.taskId === started.taskId)).toMatchObject({ status: 'succeeded' });
    expect(await (await api(c!, 'GET', `/api/headless/${started.taskId}/output`)).json()).toMatchObject({ stdout: 'session=fleet-1\ndone\n', retained: true });
  });

  it('a run on A is cancelled from B (by NOTIFY to its owner); capacity stays per host', async () => {
    const [a, b, c] = fleet;
    const first = (await (await start(a!, { prompt: 'sleep 30000' })).json()) as Started;
    const second = (await (await start(a!, { prompt: 'sleep 30000' })).json()) as Started;
    // A's two slots are taken; B still has its own.
    expect((await start(a!, { prompt: 'echo x' })).status).toBe(429);
    const elsewhere = await start(b!, { prompt: 'echo elsewhere' });
    expect(elsewhere.status).toBe(202);
    const cancelled = await api(b!, 'POST', `/api/headless/${first.taskId}/cancel`);
    expect(cancelled.status).toBe(202);
    expect(await cancelled.json()).toMatchObject({ taskId: first.taskId, status: 'running' });
    expect(await waitRun(c!, first.taskId)).toMatchObject({ status: 'cancelled' });
    // Once ended, a cancel from anywhere is 409.
    const again = await api(c!, 'POST', `/api/headless/${first.taskId}/cancel`);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'run_not_running' });
    await api(c!, 'POST', `/api/headless/${second.taskId}/cancel`);
    expect(await waitRun(b!, second.taskId)).toMatchObject({ status: 'cancelled' });
    expect(await waitRun(b!, ((await elsewhere.json()) as Started).taskId)).toMatchObject({ status: 'succeeded' });
  });

  it('of simultaneous resumes of one Session sent to A, B and C exactly one wins', async () => {
    const [a, b, c] = fleet;
    const first = (await (await start(a!, { prompt: 'session race-1' })).json()) as Started;
    await waitRun(a!, first.taskId);
    const answers = await Promise.all(
      [a, b, c, a, b, c].map((d) =>
        start(d!, { prompt: 'session race-1; sleep 500', resumeId: first.resumeId }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as Record<string, string>,
        })),
      ),
    );
    const won = answers.filter((x) => x.status === 202);
    expect(won).toHaveLength(1);
    expect(answers.filter((x) => x.status === 409).map((x) => x.body.code)).toEqual(Array(5).fill('session_busy'));
    expect(await (await api(c!, 'GET', `/api/sessions/${first.resumeId}`)).json()).toMatchObject({ status: 'busy' });
    await waitRun(b!, won[0]!.body.taskId!);
    expect(await (await api(c!, 'GET', `/api/sessions/${first.resumeId}`)).json()).toMatchObject({ status: 'idle', runCount: 2 });
  });

  it('20 simultaneous retries with one Idempotency-Key across the fleet start exactly one run', async () => {
    const body = { prompt: 'sleep 300' };
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        start(fleet[i % 3]!, body, { 'idempotency-key': 'fleet-key-1' }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as Record<string, string>,
        })),
      ),
    );
    const taskIds = new Set(answers.filter((x) => x.status === 202).map((x) => x.body.taskId));
    expect(taskIds.size).toBe(1);
    for (const x of answers.filter((x) => x.status !== 202)) expect(x).toMatchObject({ status: 409, body: { code: 'idempotency_key_in_use' } });
    const [taskId] = [...taskIds];
    await waitRun(fleet[0]!, taskId!);
    // Once answered, the key replays the same answer on any instance.
    const replayed = await start(fleet[2]!, body, { 'idempotency-key': 'fleet-key-1' });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(await replayed.json()).toMatchObject({ taskId });
  });

  it('a workspace on one instance only: a start on another is queued there and runs on the one that has it; one no member has is 404', async () => {
    const [a, , c] = fleet;
    const placed = await start(a!, { prompt: 'echo only-c' }, {}, 'only-c');
    expect(placed.status).toBe(202);
    const { taskId, status } = (await placed.json()) as Started;
    expect(status).toBe('queued');
    expect(await waitRun(a!, taskId)).toMatchObject({ workspaceId: 'only-c', status: 'succeeded' });
    // It ran on C, the only one that has the workspace: C logged its start, A did not.
    const startedLine = (daemon: Daemon) =>
      daemon
        .output()
        .split('\n')
        .some((line) => line.includes(taskId) && line.includes('run started'));
    expect(startedLine(c!)).toBe(true);
    expect(startedLine(a!)).toBe(false);
    const refused = await start(a!, { prompt: 'echo x' }, {}, 'nowhere');
    expect(refused.status).toBe(404);
    expect(await refused.json()).toMatchObject({
      code: 'workspace_not_found',
      detail: 'No workspace "nowhere" on this instance, and no member of the fleet runs one.',
    });
  });

  it('kill -9 of A: another instance interrupts its runs once its lease runs out, ends their events, and delivers its webhooks', async () => {
    const [a, b, c] = fleet;
    const seen = receiver.received.length;
    failing = true;
    // A run that ended on A whose webhook A is still retrying, and a run still running on A.
    const ended = (await (await start(a!, { prompt: 'echo before' })).json()) as Started;
    await waitRun(b!, ended.taskId);
    await waitFor(() => receiver.received.slice(seen).some((r) => r.body.includes(ended.taskId)), { what: "A's first, failed attempt", timeoutMs: 240_000 });
    const running = (await (await start(a!, { prompt: 'session dies-1; sleep 60000' })).json()) as Started;
    await waitFor(async () => (await (await api(b!, 'GET', `/api/sessions/${running.resumeId}`)).json()).resumable === true, {
      what: 'the agent session id to be stored',
      timeoutMs: 240_000,
    });
    expect(await (await api(b!, 'GET', `/api/sessions/${running.resumeId}`)).json()).toMatchObject({ status: 'busy' });
    const stream = api(c!, 'GET', `/api/headless/${running.taskId}/events`);
    expect(await a!.stop('SIGKILL')).toBeNull();
    failing = false;

    const final = await waitRun(b!, running.taskId, 240_000);
    expect(final).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    // Its events end for a reader on another instance.
    const events = sseEvents(await readToEnd(await stream, 240_000)).map((e) => e.parsed);
    expect(events.at(-1)).toMatchObject({ type: 'run.ended', data: { status: 'interrupted' } });
    // Both webhooks arrive, signed, from the instances that took them over.
    const delivered = (taskId: string, status: string) =>
      receiver.received.slice(seen).some((r) => {
        const payload = new Webhook(SECRET).verify(r.body, r.headers) as { data: { taskId: string; status: string } };
        return payload.data.taskId === taskId && payload.data.status === status;
      });
    await waitFor(() => delivered(ended.taskId, 'succeeded') && delivered(running.taskId, 'interrupted'), { what: 'the webhooks A left', timeoutMs: 240_000 });
    await waitFor(async () => (await read(c!, ended.taskId)).webhooks[0].state === 'delivered', { what: 'the record to show it delivered' });
    // The Session A held is free again, and resumable from anywhere.
    expect(await (await api(c!, 'GET', `/api/sessions/${running.resumeId}`)).json()).toMatchObject({ status: 'idle' });
    const resumed = await start(c!, { prompt: 'echo again', resumeId: running.resumeId });
    expect(resumed.status).toBe(202);
    expect(await waitRun(b!, ((await resumed.json()) as Started).taskId)).toMatchObject({ status: 'succeeded' });
  });

  it('nothing acknowledged is lost: every run any instance acknowledged is read, ended, from each survivor', async () => {
    const [, b, c] = fleet;
    expect(acknowledged.size).toBe(11);
    for (const taskId of acknowledged) {
      for (const daemon of [b!, c!]) expect((await read(daemon, taskId)).status).toMatch(/^(succeeded|cancelled|interrupted)$/);
    }
    const listed = (await (await api(b!, 'GET', '/api/headless?wsId=ws&limit=100')).json()) as { runs: Array<{ taskId: string }> };
    expect(listed.runs.length).toBe(10);
  });
});

describe("headless-run-webhook worker: a machine that runs a fleet's queued runs for its labels, with no public API", () => {
  const gpuWorkspace = { id: 'gpu-ws', path: '.', agents: ['fake'], labels: ['gpu'] };
  const startedHere = (daemon: Daemon, taskId: string) =>
    daemon
      .output()
      .split('\n')
      .some((line) => line.includes(taskId) && line.includes('run started'));

  it('refuses what would make it more than a worker: no store to share, an address off loopback, a socket', async () => {
    const dir = daemonDir();
    const noStore = await runCli(['worker', '--port', '0'], { cwd: dir, env: { HEADLESS_STORE_URL: '' } });
    expect(noStore.code).toBe(2);
    expect(noStore.stderr).toContain('a worker joins a fleet: give --store postgres://');
    const offLoopback = await runCli(['worker', '--host', '0.0.0.0', '--store', 'postgres://x@127.0.0.1/db'], { cwd: dir });
    expect(offLoopback.code).toBe(2);
    expect(offLoopback.stderr).toContain('a worker answers on loopback only');
  });

  it('a start on an API daemon for a workspace that asks for "gpu" runs on the worker with that label; kill -9 of the worker mid-run interrupts it, never re-run', async () => {
    const url = await postgres.database();
    const env = { HEADLESS_STORE_URL: url };
    // An API daemon with no workspace of its own (examples/kubernetes/fleet.yaml's).
    const apiDaemon = await startDaemon(daemonDir({ workspaces: [] }), undefined, env);
    const plain = await startDaemon(daemonDir({ workspaces: [gpuWorkspace, { id: 'ws', path: '.', agents: ['fake'] }] }), undefined, env);
    const worker = await startDaemon(daemonDir({ workspaces: [gpuWorkspace] }), ['worker', '--port', '0', '--labels', 'gpu,big'], env);
    expect(worker.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
    expect(worker.output()).toContain('"mode":"worker"');

    const quick = (await (await start(apiDaemon, { prompt: 'echo on-gpu' }, {}, 'gpu-ws')).json()) as Started;
    expect(quick.status).toBe('queued');
    expect(await waitRun(apiDaemon, quick.taskId)).toMatchObject({ status: 'succeeded', workspaceId: 'gpu-ws' });
    expect([startedHere(worker, quick.taskId), startedHere(plain, quick.taskId), startedHere(apiDaemon, quick.taskId)]).toEqual([true, false, false]);
    // Its run calls back the worker it runs on, not the daemon its start arrived at: its Inbox push is taken.
    const pushing = (await (await start(apiDaemon, { prompt: 'push from-the-worker' }, {}, 'gpu-ws')).json()) as Started;
    expect(await waitRun(apiDaemon, pushing.taskId)).toMatchObject({ status: 'succeeded' });
    const inbox = (await (await api(apiDaemon, 'GET', '/api/workspaces/gpu-ws/inbox')).json()) as { items: Array<{ title: string }> };
    expect(inbox.items.map((i) => i.title)).toContain('from-the-worker');

    const long = (await (await start(plain, { prompt: 'session gpu-1; sleep 60000' }, {}, 'gpu-ws')).json()) as Started;
    await waitFor(async () => (await read(apiDaemon, long.taskId)).status === 'running', { what: 'the worker to take the run', timeoutMs: 240_000 });
    expect(await worker.stop('SIGKILL')).toBeNull();
    // Interrupted by a survivor once the worker's lease runs out (10 s here), not run again anywhere.
    expect(await waitRun(apiDaemon, long.taskId, 240_000)).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    // Its Session is freed by the same sweep, once its run has ended.
    await expect.poll(async () => ((await (await api(apiDaemon, 'GET', `/api/sessions/${long.resumeId}`)).json()) as { status: string }).status).toBe('idle');
    expect([startedHere(plain, long.taskId), startedHere(apiDaemon, long.taskId)]).toEqual([false, false]);
    // With no member left that has the label, a start is refused at once rather than queued forever.
    const refused = await start(apiDaemon, { prompt: 'echo x' }, {}, 'gpu-ws');
    expect(refused.status).toBe(404);
  });

  it("kill -9 of the API daemon a caller follows a worker's run on: it follows on from another with Last-Event-ID, losing no event", async () => {
    const env = { HEADLESS_STORE_URL: await postgres.database() };
    const [front1, front2] = await Promise.all([
      startDaemon(daemonDir({ workspaces: [] }), undefined, env),
      startDaemon(daemonDir({ workspaces: [] }), undefined, env),
    ]);
    await startDaemon(daemonDir({ workspaces: [gpuWorkspace] }), ['worker', '--port', '0', '--labels', 'gpu'], env);
    const run = (await (await start(front1!, { prompt: 'echo one; sleep 1500; echo two; sleep 1500; echo three' }, {}, 'gpu-ws')).json()) as Started;
    let seen = '';
    const events = `/api/headless/${run.taskId}/events`;
    const following = api(front1!, 'GET', events)
      .then((answer) => readToEnd(answer, 240_000, (text) => (seen += text)))
      // Cut by the kill: what arrived before it is what the caller has.
      .catch(() => undefined);
    await waitFor(() => sseEvents(seen).length >= 2, { what: 'the first events through the first API daemon', timeoutMs: 240_000 });
    expect(await front1!.stop('SIGKILL')).toBeNull();
    await following;
    const before = sseEvents(seen);
    const after = sseEvents(await readToEnd(await api(front2!, 'GET', events, undefined, { 'last-event-id': String(before.at(-1)?.parsed.seq) }), 240_000));
    const seqs = [...before, ...after].map((e) => e.parsed.seq);
    expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] as number) + i));
    expect(after.at(-1)?.parsed).toMatchObject({ type: 'run.ended', data: { status: 'succeeded' } });
    // Every event the run has, once: the whole timeline read afterwards is what the caller got.
    const whole = sseEvents(await readToEnd(await api(front2!, 'GET', `${events}?after=0`), 240_000)).map((e) => e.parsed.seq);
    expect(seqs).toEqual(whole.slice(whole.indexOf(seqs[0] as number)));
  });
});
