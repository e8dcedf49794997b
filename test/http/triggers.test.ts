import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { sign as signGithub } from '@octokit/webhooks-methods';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Keyv } from 'keyv';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import type { TriggerDefinition } from '../../src/core/triggers/trigger-spec';
import { sha256 } from '../../src/core/util/ids';
import { faultyKeyv } from '../helpers/faulty-store';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';

/** docs/triggers.md: what an outsider's deliveries cost, replays of a captured one, and a trigger's share of the slots. */

/** Its runs wait until this file exists (bounded): made once the test is done with them. */
let release = '';
beforeEach(() => {
  release = join(mkdtempSync(join(tmpdir(), 'hrw-triggers-')), 'release');
});
afterEach(async () => {
  await closeAllHosts();
  rmSync(join(release, '..'), { recursive: true, force: true });
});

const GITHUB_SECRET = 'a-github-webhook-secret';
/** A GitHub issue, as GitHub sends it (trimmed). */
const ISSUE = JSON.stringify({ action: 'opened', issue: { number: 7, title: 'Login fails' }, repository: { full_name: 'acme/app' } });

const github = (): TriggerDefinition => ({
  name: 'gh',
  workspace: 'ws',
  sender: 'github',
  run: { agent: 'fake' },
  secret: GITHUB_SECRET,
  prompt: `go; wait-file ${release}`,
});

const githubHeaders = async (body: string, delivery: string) => ({
  'content-type': 'application/json',
  'x-github-event': 'issues',
  'x-github-delivery': delivery,
  'x-hub-signature-256': await signGithub(GITHUB_SECRET, body),
});

async function send(host: TestHost, trigger: string, body: string, headers: Record<string, string>, remote?: string) {
  const res = await host.request('POST', `/api/triggers/${trigger}`, { body, headers: { 'content-type': 'application/json', ...headers }, remote });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, any> };
}

async function deliveriesOf(host: TestHost, trigger: string) {
  return (await (await host.request('GET', `/api/triggers/${trigger}/deliveries`)).json()) as Record<string, any>;
}

describe('deliveries that fail verification', () => {
  it('write no row to the deliveries log: they are counted in the metrics and sampled in memory, with the peer', async () => {
    const host = await createTestHost({ triggers: [github()] });
    const wrong = { 'x-hub-signature-256': await signGithub('not-the-secret', ISSUE) };
    for (const remote of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) expect((await send(host, 'gh', ISSUE, wrong, remote)).status).toBe(401);
    expect((await send(host, 'no-such-trigger', ISSUE, wrong, '203.0.113.4')).status).toBe(401);
    const log = await deliveriesOf(host, 'gh');
    expect(log.deliveries).toEqual([]);
    expect(log.unverified).toMatchObject({ count: 3, recent: [{ peer: '203.0.113.3' }, { peer: '203.0.113.2' }, { peer: '203.0.113.1' }] });
    const metrics = await (await host.request('GET', '/metrics')).text();
    expect(metrics).toContain('headless_trigger_deliveries_total{trigger="gh",outcome="unverified"} 3');
    // A name that is no trigger is counted without it: an outsider's names never become labels.
    expect(metrics).toContain('headless_trigger_deliveries_total{trigger="(none)",outcome="unverified"} 1');
    expect(metrics).not.toContain('no-such-trigger');
  });

  it('a peer that sends 10 in a minute is refused 429 with Retry-After, its right signature included; other peers are not', async () => {
    const host = await createTestHost({ triggers: [github()] });
    const wrong = { 'x-hub-signature-256': await signGithub('not-the-secret', ISSUE) };
    for (let i = 0; i < 10; i++) expect((await send(host, i % 2 ? 'gh' : 'nope', ISSUE, wrong, '198.51.100.9')).status).toBe(401);
    const right = await githubHeaders(ISSUE, 'd-1');
    const throttled = await send(host, 'gh', ISSUE, right, '198.51.100.9');
    expect(throttled).toMatchObject({ status: 429, body: { code: 'too_many_attempts' } });
    expect(Number(throttled.retryAfter)).toBeGreaterThan(0);
    expect(await send(host, 'gh', ISSUE, right, '198.51.100.10')).toMatchObject({ status: 202, body: { outcome: 'started' } });
  });
});

describe('a captured GitHub delivery sent again', () => {
  it('under a new X-GitHub-Delivery, or none, is a repeat of the first: the signed body is part of the key', async () => {
    const host = await createTestHost({ triggers: [github()] });
    const first = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'));
    expect(first).toMatchObject({ status: 202, body: { outcome: 'started' } });
    const renamed = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-2'));
    expect(renamed).toMatchObject({ status: 202, body: { outcome: 'deduplicated', taskId: first.body.taskId } });
    const { 'x-github-delivery': _, ...unnamed } = await githubHeaders(ISSUE, 'x');
    expect(await send(host, 'gh', ISSUE, unnamed)).toMatchObject({ status: 202, body: { outcome: 'deduplicated', taskId: first.body.taskId } });
    // Another body under another id is another event; under the first's id, a repeat still.
    const other = ISSUE.replace('Login fails', 'Logout fails');
    expect(await send(host, 'gh', other, await githubHeaders(other, 'delivery-3'))).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await send(host, 'gh', other, await githubHeaders(other, 'delivery-1'))).toMatchObject({
      body: { outcome: 'deduplicated', taskId: first.body.taskId },
    });
  });
});

describe("a delivery's repeat keys, as the store keeps them", () => {
  /** A GitHub delivery's two keys: its id and its signed body, each in its trigger's scope. */
  const keyIds = (delivery: string, body: string) => [
    `idem:${sha256(`trigger:gh\0trigger:gh:${sha256(delivery)}`)}`,
    `idem:${sha256(`trigger-body:gh\0${sha256(body)}`)}`,
  ];
  /** Rewrites a kept entry, keeping its expiry. */
  async function rewrite(store: Keyv, id: string, change: (entry: Record<string, unknown>) => Record<string, unknown>) {
    const raw = await store.get(id, { raw: true });
    await store.set(id, change(raw?.value as Record<string, unknown>), (raw?.expires ?? 0) - Date.now());
  }
  const PROBLEM = { 'content-type': 'application/problem+json' };

  it("keep the trigger's own answer, its run and the run's status; a repeat is answered with that run", async () => {
    const store = createMemoryKeyv();
    const host = await createTestHost({ store, triggers: [github()] });
    const first = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'));
    for (const id of keyIds('delivery-1', ISSUE))
      expect(await store.get(id)).toMatchObject({ version: 2, state: 'done', answer: { taskId: first.body.taskId, status: 'running' } });
    expect(await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'))).toMatchObject({
      body: { outcome: 'deduplicated', taskId: first.body.taskId },
    });
  });

  it('cut off before their answer was kept (the service died), are answered by the run they were bound to', async () => {
    const store = createMemoryKeyv();
    const host = await createTestHost({ store, triggers: [github()] });
    const first = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'));
    for (const id of keyIds('delivery-1', ISSUE)) await rewrite(store, id, ({ answer: _, ...e }) => ({ ...e, state: 'pending', taskId: first.body.taskId }));
    expect(await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'))).toMatchObject({
      body: { outcome: 'deduplicated', taskId: first.body.taskId },
    });
    expect(host.spawner.count).toBe(1);
  });

  it('whose first copy started its run but was never logged (the service stopped first): the repeat logs it, from its run', async () => {
    const faulty = faultyKeyv();
    let refusing = true;
    // The state a kill -9 between the run's start and the log's write leaves: the run, and no log entry.
    faulty.state.refuse = (w) => refusing && JSON.stringify(w.value ?? {}).includes('"outcome":"started"');
    const host = await createTestHost({ store: faulty.keyv(), triggers: [github()] });
    const first = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'));
    expect(faulty.state.refused.length).toBeGreaterThan(0);
    expect((await deliveriesOf(host, 'gh')).deliveries).toEqual([]);
    refusing = false;
    expect(await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'))).toMatchObject({
      body: { outcome: 'deduplicated', taskId: first.body.taskId },
    });
    const log = (await deliveriesOf(host, 'gh')).deliveries;
    expect(log.map((d: { outcome: string; taskId?: string }) => [d.outcome, d.taskId])).toEqual([
      ['deduplicated', first.body.taskId],
      ['started', first.body.taskId],
    ]);
    expect(log[1]).toMatchObject({ deliveryId: 'delivery-1', id: first.body.delivery });
  });

  it('kept before version 2, as HTTP answers (a 202, a spawn failure), are still repeats: answered with the run they name', async () => {
    const store = createMemoryKeyv();
    const host = await createTestHost({ store, triggers: [github()] });
    await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'));
    const [byId = '', byBody = ''] = keyIds('delivery-1', ISSUE);
    await rewrite(store, byId, ({ version: _, ...e }) => ({ ...e, answer: { status: 202, body: { taskId: 'run_before', status: 'running' }, headers: {} } }));
    await rewrite(store, byBody, ({ version: _, ...e }) => ({
      ...e,
      answer: { status: 500, body: { code: 'spawn_failed', status: 500, taskId: 'run_failed_before' }, headers: PROBLEM },
    }));
    expect(await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-1'))).toMatchObject({
      status: 202,
      body: { outcome: 'deduplicated', taskId: 'run_before' },
    });
    // Under another id, the same body: a repeat by the body's key.
    expect(await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'delivery-2'))).toMatchObject({
      status: 202,
      body: { outcome: 'deduplicated', taskId: 'run_failed_before' },
    });
    expect(host.spawner.count).toBe(1);
  });
});

describe("a trigger's share of the slots and the queue", () => {
  const burst = (): TriggerDefinition => ({
    name: 'burst',
    workspace: 'ws',
    sender: 'generic',
    verify: { method: 'bearer' },
    run: { agent: 'fake' },
    secret: 'burst-token',
    prompt: `go; wait-file ${release}`,
  });

  it('by default half the slots and a quarter of the queue: the rest of a burst is 503 with Retry-After, other callers still run', async () => {
    const host = await createTestHost({ triggers: [burst()], maxConcurrentRuns: 4, queue: { max: 8 } });
    const answers = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => send(host, 'burst', JSON.stringify({ n }), { authorization: 'Bearer burst-token' })));
    const outcomes = answers.map((a) => (a.status === 202 ? a.body.outcome : `${a.status} ${a.body.code}`)).sort();
    expect(outcomes).toEqual(['503 trigger_busy', '503 trigger_busy', 'queued', 'queued', 'started', 'started']);
    for (const refused of answers.filter((a) => a.status === 503)) expect(refused.retryAfter).toBe('30');
    // Two slots are left for everyone else, and the queue has room.
    const others = [await host.start(`wait-file ${release}`), await host.start(`wait-file ${release}`)];
    for (const { taskId } of others) expect(await (await host.request('GET', `/api/headless/${taskId}`)).json()).toMatchObject({ status: 'running' });
    expect((await host.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo later', agent: 'fake' } })).status).toBe(202);
    // Refused for now, not lost: the deliveries log says why, and the sender's retry is taken once there is room.
    expect((await deliveriesOf(host, 'burst')).deliveries.filter((d: Record<string, any>) => d.outcome === 'refused')).toHaveLength(2);
    writeFileSync(release, '');
    const queued = answers.find((a) => a.body.outcome === 'queued')?.body.taskId as string;
    expect(await host.waitEnded(queued)).toMatchObject({ status: 'succeeded' });
    expect(await send(host, 'burst', JSON.stringify({ n: 7 }), { authorization: 'Bearer burst-token' })).toMatchObject({ status: 202 });
  });

  it('limits.concurrent and limits.queued set its share', async () => {
    const host = await createTestHost({ triggers: [{ ...burst(), limits: { concurrent: 1, queued: 1 } }], maxConcurrentRuns: 4, queue: { max: 8 } });
    const outcomes: string[] = [];
    for (const n of [1, 2, 3]) {
      const a = await send(host, 'burst', JSON.stringify({ n }), { authorization: 'Bearer burst-token' });
      outcomes.push(a.status === 202 ? a.body.outcome : `${a.status} ${a.body.code}`);
    }
    expect(outcomes).toEqual(['started', 'queued', '503 trigger_busy']);
  });
});

describe('two copies of one delivery at once (docs/triggers.md: Filters, repeats and resolutions)', () => {
  /** A store that holds the first copy's claim of its key (its first idempotency write) until `release`; and a log that says when the second copy waits. */
  function heldFirstCopy() {
    const { keyv, state } = faultyKeyv();
    let release: () => void = () => undefined;
    let holding = false;
    const held = new Promise<void>((resolve) => {
      state.hold = (write) => {
        if (holding || !write.key.startsWith('idem:')) return undefined;
        holding = true;
        resolve();
        return new Promise<void>((go) => (release = go));
      };
    });
    let waiting: () => void = () => undefined;
    const waits = new Promise<void>((resolve) => (waiting = resolve));
    const at = () => (_: Record<string, unknown>, message: string) => (message.startsWith('a repeat waits') ? waiting() : undefined);
    return { store: keyv(), held, waits, release: () => release(), logger: { info: at(), warn: at(), error: at() } };
  }

  /** Sends `second` once the first copy holds the key, and goes on once it waits for that copy (or was answered without it). */
  async function sendWhileHeld(copy: ReturnType<typeof heldFirstCopy>, first: Promise<unknown>, second: () => Promise<unknown>) {
    await copy.held;
    const answer = second();
    await Promise.race([copy.waits, answer]);
    return { first, second: answer };
  }

  it('a copy sent while the first is being handled waits for it and is answered with its run', async () => {
    const copy = heldFirstCopy();
    const host = await createTestHost({ store: copy.store, logger: copy.logger, triggers: [github()] });
    const headers = await githubHeaders(ISSUE, 'delivery-1');
    const sent = await sendWhileHeld(copy, send(host, 'gh', ISSUE, headers), () => send(host, 'gh', ISSUE, headers));
    copy.release();
    const first = (await sent.first) as Awaited<ReturnType<typeof send>>;
    expect(first).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await sent.second).toMatchObject({ status: 202, body: { outcome: 'deduplicated', taskId: first.body.taskId } });
  });

  it('when the first copy is then refused, the second is not answered "handled": both get a status the sender retries', async () => {
    const copy = heldFirstCopy();
    const host = await createTestHost({
      store: copy.store,
      logger: copy.logger,
      triggers: [{ ...github(), limits: { concurrent: 1, queued: 1 } }],
      maxConcurrentRuns: 4,
      queue: { max: 8 },
    });
    const headers = await githubHeaders(ISSUE, 'delivery-1');
    const sent = await sendWhileHeld(copy, send(host, 'gh', ISSUE, headers), () => send(host, 'gh', ISSUE, headers));
    // Meanwhile other deliveries take the trigger's whole share, so the first copy's start is refused.
    for (const n of [1, 2]) {
      const other = ISSUE.replace('Login fails', `Other ${n}`);
      expect((await send(host, 'gh', other, await githubHeaders(other, `other-${n}`))).status).toBe(202);
    }
    copy.release();
    for (const answer of [await sent.first, await sent.second] as Array<Awaited<ReturnType<typeof send>>>)
      expect(answer).toMatchObject({ status: 503, retryAfter: '30', body: { code: 'trigger_busy' } });
  });
});

describe('a resolution annotating its run (docs/triggers.md: Filters, repeats and resolutions)', () => {
  const FIRING = readFileSync(resolve(__dirname, '../fixtures/triggers/alertmanager.json'), 'utf8');
  const RESOLVED = FIRING.replaceAll('"firing"', '"resolved"');
  const alerts = (prompt: string): TriggerDefinition => ({
    name: 'alerts',
    workspace: 'ws',
    sender: 'alertmanager',
    run: { agent: 'fake' },
    secret: 'am-token',
    prompt,
  });
  const bearer = { authorization: 'Bearer am-token' };
  const resolvedEvents = async (host: TestHost, taskId: string) =>
    ((await (await host.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string }> }).events.filter(
      (e) => e.type === 'trigger.resolved',
    );

  it('of a running run adds trigger.resolved to its timeline and says so', async () => {
    const host = await createTestHost({ triggers: [alerts(`go; wait-file ${release}`)] });
    const { taskId } = (await send(host, 'alerts', FIRING, bearer)).body;
    expect(await send(host, 'alerts', RESOLVED, bearer)).toMatchObject({ status: 202, body: { outcome: 'resolved', taskId, reason: 'its run was told' } });
    writeFileSync(release, '');
    await host.waitEnded(taskId);
    expect(await resolvedEvents(host, taskId)).toHaveLength(1);
  });

  it('of a run that has ended adds nothing (its timeline ends with run.ended) and says that, not that the run was told', async () => {
    const host = await createTestHost({ triggers: [alerts('go')] });
    const { taskId } = (await send(host, 'alerts', FIRING, bearer)).body;
    await host.waitEnded(taskId);
    expect(await send(host, 'alerts', RESOLVED, bearer)).toMatchObject({
      status: 202,
      body: { outcome: 'resolved', taskId, reason: 'its run had already ended: nothing was added to it' },
    });
    expect(await resolvedEvents(host, taskId)).toEqual([]);
    expect((await deliveriesOf(host, 'alerts')).deliveries[0]).toMatchObject({
      outcome: 'resolved',
      reason: 'its run had already ended: nothing was added to it',
    });
  });
});

describe("a trigger's run spec", () => {
  it("reaches its runs over the workspace's: its title a template rendered per delivery (the sender's values marked), the rest as written", async () => {
    const workspaces = [{ id: 'ws', path: tmpdir(), agents: ['fake'], run: { maxTurns: 20, title: 'the workspace’s' } }];
    const trigger = {
      ...github(),
      run: { agent: 'fake', title: 'Issue #{{ payload.issue.number }}: {{ payload.issue.title }}', metadata: { team: 'web' }, maxTurns: 5 },
    };
    const host = await createTestHost({ workspaces, triggers: [trigger] });
    const { body } = await send(host, 'gh', ISSUE, await githubHeaders(ISSUE, 'spec-1'));
    const record = (await (await host.request('GET', `/api/headless/${body.taskId}`)).json()) as Record<string, any>;
    expect(record).toMatchObject({ title: 'Issue #⟦7⟧: ⟦Login fails⟧', metadata: { team: 'web' }, budget: { maxTurns: 5 } });
    expect(record.spec).toMatchObject({ agent: 'fake', title: 'Issue #⟦7⟧: ⟦Login fails⟧', maxTurns: 5, permissions: 'full' });
    writeFileSync(release, '');
  });
});
