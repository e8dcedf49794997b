import { randomBytes } from 'node:crypto';
import { http, HttpResponse } from 'msw';
import { setupServer } from 'msw/node';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { HeadlessHandlerOptions } from '../../src/core/index';
import { isNonPublicAddress } from '../../src/core/delivery/transport';
import { api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { type TestHost, closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { faultyKeyv } from '../helpers/faulty-store';
import { closeReceivers, startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';

const dirs: string[] = [];
afterEach(async () => {
  await closeAllHosts();
  await closeReceivers();
});
afterAll(() => cleanupDaemons(dirs));

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const SECRET = newSecret();

interface Delivery {
  id: string | null;
  url: string;
  event: string;
  state: string;
  attempts: number;
  nextAttemptAt: string | null;
  lastStatus?: number;
  lastError?: string;
  deliveredAt?: string;
}

async function host(webhooks: HeadlessHandlerOptions['webhooks'] = {}, extra: Partial<HeadlessHandlerOptions> = {}): Promise<TestHost> {
  return createTestHost({
    webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true, retryDelaysMs: [100, 100, 100], ...webhooks },
    ...extra,
  });
}

const deliveries = async (h: TestHost, taskId: string) =>
  ((await (await h.request('GET', `/api/headless/${taskId}`)).json()) as { webhooks?: Delivery[] }).webhooks;

async function settled(h: TestHost, taskId: string, count = 1): Promise<Delivery[]> {
  let last: Delivery[] | undefined;
  await waitFor(
    async () => {
      last = await deliveries(h, taskId);
      return last !== undefined && last.length === count && last.every((d) => d.state === 'delivered' || d.state === 'failed');
    },
    { what: 'the webhook deliveries to settle', timeoutMs: 240_000 },
  );
  return last!;
}

describe('completion webhooks', () => {
  it('POSTs the final record when a run ends, signed per Standard Webhooks; the record shows it delivered', async () => {
    const receiver = await startReceiver();
    const h = await host();
    const { taskId } = await h.start('echo hi', { webhook: { url: `${receiver.url}/hook?x=1` } });
    const [delivery] = await settled(h, taskId);
    expect(delivery).toMatchObject({
      state: 'delivered',
      attempts: 1,
      lastStatus: 200,
      event: 'run.ended',
      url: `${receiver.url}/hook?x=1`,
      nextAttemptAt: null,
    });
    expect(Date.parse(delivery!.deliveredAt!)).not.toBeNaN();
    expect(receiver.received).toHaveLength(1);
    const got = receiver.received[0]!;
    expect(got.path).toBe('/hook?x=1');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['webhook-id']).toBe(delivery!.id);
    // The package's own verifier accepts it (and would throw on a wrong secret or body).
    const payload = new Webhook(SECRET).verify(got.body, got.headers) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(payload.type).toBe('run.ended');
    expect(payload.data).toMatchObject({ taskId, status: 'succeeded', exitCode: 0 });
    expect(payload.data).not.toHaveProperty('webhooks');
    expect(() => new Webhook(newSecret()).verify(got.body, got.headers)).toThrow();
    expect(() => new Webhook(SECRET).verify(got.body.replace('succeeded', 'failed!!!'), got.headers)).toThrow();
  });

  it('retries after a 500 and after a timeout, with the same webhook-id and body each time', async () => {
    const receiver = await startReceiver((i) => (i === 0 ? 500 : i === 1 ? 'hang' : 200));
    // Long enough that only the hanging answer times out, on a busy machine too.
    const h = await host({ timeoutMs: 5000 });
    const { taskId } = await h.start('echo hi', { webhook: { url: receiver.url } });
    const [delivery] = await settled(h, taskId);
    expect(delivery).toMatchObject({ state: 'delivered', attempts: 3, lastStatus: 200 });
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(receiver.received.map((r) => r.body)).size).toBe(1);
    for (const r of receiver.received) expect(() => new Webhook(SECRET).verify(r.body, r.headers)).not.toThrow();
  });

  it('shows a delivery being retried, then gives it up visibly once the schedule is spent', async () => {
    const receiver = await startReceiver(() => 503);
    // The first retry far enough off to be seen pending, however slowly the first attempt is read back.
    const h = await host({ retryDelaysMs: [10_000, 400] });
    const { taskId } = await h.start('echo hi', { webhook: { url: receiver.url } });
    await waitFor(async () => (await deliveries(h, taskId))?.[0]?.attempts === 1, { what: 'the first attempt' });
    const retrying = (await deliveries(h, taskId))![0]!;
    expect(retrying).toMatchObject({ state: 'pending', lastStatus: 503, lastError: 'answered 503: receiver says no' });
    expect(Date.parse(retrying.nextAttemptAt!)).toBeGreaterThan(Date.now());
    const [given] = await settled(h, taskId);
    expect(given).toMatchObject({ state: 'failed', attempts: 3, lastStatus: 503, nextAttemptAt: null });
    expect(receiver.received).toHaveLength(3);
  });

  it('does not follow a redirect', async () => {
    const receiver = await startReceiver((_, r) => (r.path === '/moved' ? 200 : 307));
    const h = await host({ retryDelaysMs: [] });
    const { taskId } = await h.start('echo hi', { webhook: { url: receiver.url } });
    const [delivery] = await settled(h, taskId);
    expect(delivery).toMatchObject({ state: 'failed', lastStatus: 307, lastError: 'answered 307: redirects are not followed' });
    expect(receiver.received.map((r) => r.path)).toEqual(['/']);
  });

  it('agent.session too when asked: the Session is resumable before the run ends', async () => {
    const receiver = await startReceiver();
    const h = await host();
    const { taskId, resumeId } = await h.start('session s-1; sleep 300; echo done', { webhook: { url: receiver.url, events: ['agent.session', 'run.ended'] } });
    const got = await settled(h, taskId, 2);
    expect(got.map((d) => [d.event, d.state])).toEqual([
      ['agent.session', 'delivered'],
      ['run.ended', 'delivered'],
    ]);
    const types = receiver.received.map((r) => JSON.parse(r.body) as { type: string; data: { resumeId?: string } });
    expect(types[0]).toMatchObject({ type: 'agent.session', data: { taskId, resumeId } });
    expect(types[1]!.type).toBe('run.ended');
  });

  it('a workspace webhook, signed with the workspace’s own secret; waiting while the run runs', async () => {
    const receiver = await startReceiver();
    const own = newSecret();
    const h = await host(
      { allowPerStartUrls: false },
      {
        workspaces: [{ id: 'ws', path: process.cwd(), agents: ['fake'], webhook: { url: `${receiver.url}/ws`, secret: own } }],
      },
    );
    const { taskId } = await h.start('sleep 300');
    expect(await deliveries(h, taskId)).toEqual([
      { id: null, url: `${receiver.url}/ws`, event: 'run.ended', state: 'waiting', attempts: 0, nextAttemptAt: null },
    ]);
    await settled(h, taskId);
    expect(() => new Webhook(own).verify(receiver.received[0]!.body, receiver.received[0]!.headers)).not.toThrow();
    expect(() => new Webhook(SECRET).verify(receiver.received[0]!.body, receiver.received[0]!.headers)).toThrow();
  });

  it('a hanging receiver holds neither runs nor other deliveries', async () => {
    const hanging = await startReceiver(() => 'hang');
    const good = await startReceiver();
    const h = await host({ timeoutMs: 20_000 });
    const stuck = await Promise.all([1, 2, 3].map(() => h.start('echo x', { webhook: { url: hanging.url } })));
    await waitFor(() => hanging.received.length === 3, { what: 'three hanging deliveries' });
    const { taskId } = await h.start('echo y', { webhook: { url: good.url } });
    const [delivery] = await settled(h, taskId);
    expect(delivery!.state).toBe('delivered');
    for (const run of stuck) {
      expect(await h.waitEnded(run.taskId)).toMatchObject({ status: 'succeeded' });
      expect((await deliveries(h, run.taskId))![0]).toMatchObject({ state: 'pending', attempts: 0 });
    }
  });

  it('at most `concurrency` deliveries to one target are in flight at once', async () => {
    const hanging = await startReceiver(() => 'hang');
    const healthy = await startReceiver();
    const h = await host({ timeoutMs: 20_000, concurrency: 2 });
    const held = await Promise.all([1, 2, 3, 4].map(() => h.start('echo x', { webhook: { url: hanging.url } })));
    for (const run of held) await h.waitEnded(run.taskId);
    // Their four deliveries were due before this one: once it is recorded delivered, the dispatcher has gone past them.
    const { taskId } = await h.start('echo y', { webhook: { url: healthy.url } });
    expect(await settled(h, taskId)).toEqual([expect.objectContaining({ state: 'delivered' })]);
    expect(hanging.received).toHaveLength(2);
  });

  it('a receiver that hangs never delays another target’s deliveries: each target has its own lane', async () => {
    const hanging = await startReceiver(() => 'hang');
    const healthy = await startReceiver();
    const h = await host({ timeoutMs: 60_000, concurrency: 2 }, { maxConcurrentRuns: 10 });
    await Promise.all([1, 2, 3, 4, 5, 6].map(() => h.start('echo x', { webhook: { url: hanging.url } })));
    await waitFor(() => hanging.received.length === 2, { what: 'the hanging lane to fill' });
    const { taskId } = await h.start('echo x', { webhook: { url: healthy.url } });
    // Delivered while the other target's attempts still hang (they would for 60 s).
    const [delivery] = await settled(h, taskId);
    expect(delivery).toMatchObject({ state: 'delivered', attempts: 1 });
    expect(hanging.received).toHaveLength(2);
  });

  it('an attempt whose result the store refuses is made again, and recorded once the store takes it', async () => {
    const receiver = await startReceiver();
    const store = faultyKeyv();
    let refusedOnce = false;
    store.state.refuse = (w) => {
      const delivered = (w.value?.deliveries as Array<{ state: string }> | undefined)?.some((d) => d.state === 'delivered');
      if (refusedOnce || !delivered) return false;
      refusedOnce = true;
      return true;
    };
    const h = await host({}, { store: store.keyv() });
    const { taskId } = await h.start('echo hi', { webhook: { url: receiver.url } });
    const [delivery] = await settled(h, taskId);
    expect(refusedOnce).toBe(true);
    // The first attempt reached the receiver, but its result was not stored: it was made again (at least once).
    expect(delivery).toMatchObject({ state: 'delivered', attempts: 1 });
    expect(receiver.received.length).toBe(2);
    expect(receiver.received[1]!.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id']);
  });
});

describe('webhook targets: refused where they would make the service an SSRF tool', () => {
  it.each([
    'http://127.0.0.1:9/x',
    'http://127.1/x',
    'http://[::1]/x',
    'http://[::ffff:127.0.0.1]/x',
    'http://169.254.169.254/latest/meta-data',
    'http://10.1.2.3/',
    'http://172.16.0.1/',
    'http://192.168.1.1/',
    'http://100.64.0.1/',
    'http://0.0.0.0/',
    'http://[fd00::1]/',
    'http://[fe80::1]/',
    // IPv6 ranges that carry an IPv4 address (here 10.0.0.1), and site-local.
    'http://[::a00:1]/',
    'http://[64:ff9b:1::a00:1]/',
    'http://[2002:a00:1::]/',
    'http://[fec0::1]/',
  ])('%s is 400 invalid_webhook by default', async (url) => {
    const h = await host({ allowPrivateTargets: false });
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', webhook: { url } } });
    expect(await problem(res)).toMatchObject({ status: 400, code: 'invalid_webhook' });
    expect(h.spawner.count).toBe(0);
  });

  it.each([
    ['ftp://example.com/x', 'ftp://example.com/x'],
    ['file:///etc/passwd', 'file:///etc/passwd'],
    ['not a url', 'not a url'],
    ['http://user:pw@example.com/', 'http://user:pw@example.com/'],
    ['a URL of 2100 characters', `https://example.com/${'x'.repeat(2100)}`],
  ])('%s is 400 invalid_webhook', async (_, url) => {
    const h = await host();
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', webhook: { url } } });
    expect(await problem(res)).toMatchObject({ status: 400, code: 'invalid_webhook' });
  });

  it.each([
    [{ url: 1 }],
    [{}],
    [{ url: 'http://example.com', events: [] }],
    [{ url: 'http://example.com', events: ['run.started'] }],
    [{ url: 'http://example.com', secret: 'x' }],
    ['http://example.com'],
  ])('webhook %j is 400 invalid_body', async (webhook) => {
    const h = await host();
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo x', agent: 'fake', webhook } });
    expect(await problem(res)).toMatchObject({ status: 400, code: 'invalid_body' });
  });

  it('a name that resolves to a private address is refused when delivering, never connected to', async () => {
    const receiver = await startReceiver();
    const h = await host({ allowPrivateTargets: false });
    const port = new URL(receiver.url).port;
    const { taskId } = await h.start('echo x', { webhook: { url: `http://localhost:${port}/x` } });
    const [delivery] = await settled(h, taskId);
    expect(delivery).toMatchObject({ state: 'failed', attempts: 1 });
    expect(delivery!.lastError).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is not a public address/);
    expect(receiver.received).toHaveLength(0);
  });

  it('per-start URLs only where the installation allows them, and only with a secret', async () => {
    const closed = await host({ allowPerStartUrls: false });
    const body = { prompt: 'echo x', agent: 'fake', webhook: { url: 'https://example.com/h' } };
    expect(await problem(await closed.request('POST', '/api/workspaces/ws/headless', { json: body }))).toMatchObject({
      status: 403,
      code: 'webhook_not_allowed',
    });
    const secretless = await createTestHost({ webhooks: { allowPerStartUrls: true } });
    expect(await problem(await secretless.request('POST', '/api/workspaces/ws/headless', { json: body }))).toMatchObject({
      status: 403,
      code: 'webhook_not_allowed',
    });
    expect(closed.spawner.count + secretless.spawner.count).toBe(0);
  });

  it('the address check knows the ranges, mapped IPv6 included', () => {
    for (const ip of ['127.0.0.1', '10.0.0.1', '::1', '::ffff:7f00:1', '::ffff:10.0.0.1', 'fe80::1', '64:ff9b::a00:1', '224.0.0.1'])
      expect(isNonPublicAddress(ip), ip).toBe(true);
    for (const ip of ['93.184.215.14', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) expect(isNonPublicAddress(ip), ip).toBe(false);
  });

  it('bad webhook settings fail the handler at creation with the reason', async () => {
    await expect(createTestHost({ webhooks: { secret: 'not-a-secret' } })).rejects.toThrow(/webhooks.secret must be "whsec_"/);
    await expect(
      createTestHost({ webhooks: { secret: SECRET }, workspaces: [{ id: 'ws', path: process.cwd(), webhook: { url: 'http://127.0.0.1/x' } }] }),
    ).rejects.toThrow(/workspace "ws" webhook URL http:\/\/127.0.0.1\/x: 127.0.0.1 is not a public address/);
  });
});

describe('a public receiver over https (faked with msw: no network here, so no DNS either)', () => {
  const seen: Array<{ url: string; headers: Record<string, string>; body: string }> = [];
  const server = setupServer(
    http.post('https://93.184.215.14/endpoint', async ({ request }) => {
      seen.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text() });
      return HttpResponse.text('ok', { status: 204 });
    }),
  );

  it('is delivered, signed, to an https URL on a public address', async () => {
    server.listen({ onUnhandledRequest: 'bypass' });
    try {
      const h = await host({ allowPrivateTargets: false });
      const { taskId } = await h.start('echo hi', { webhook: { url: 'https://93.184.215.14/endpoint' } });
      const [delivery] = await settled(h, taskId);
      expect(delivery, JSON.stringify(delivery)).toMatchObject({ state: 'delivered', lastStatus: 204 });
      expect(seen).toHaveLength(1);
      expect(new Webhook(SECRET).verify(seen[0]!.body, seen[0]!.headers)).toMatchObject({ type: 'run.ended', data: { taskId } });
    } finally {
      server.close();
    }
  });
});

describe('webhooks through the daemon', () => {
  function config(dir: string, url: string, retryDelaysMs: number[]) {
    writeConfig(dir, {
      webhooks: { allowPrivateTargets: true, retryDelaysMs },
      workspaces: [{ id: 'ws', path: '.', agents: ['fake'], webhook: { url } }],
    });
  }

  it('a delivery being retried survives kill -9 and is delivered after the restart, same webhook-id', async () => {
    let failing = true;
    const receiver = await startReceiver(() => (failing ? 500 : 200));
    const dir = tempDir();
    dirs.push(dir);
    config(dir, receiver.url, [1500, 1500, 1500]);
    const env = { HEADLESS_WEBHOOK_SECRET: SECRET };
    const first = await startDaemon(dir, ['--port', '0'], env);
    const { taskId } = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: 'echo hi', agent: 'fake' })).json()) as { taskId: string };
    await waitFor(() => receiver.received.length === 1, { what: 'the first, failed attempt' });
    expect(await first.stop('SIGKILL')).toBeNull();
    failing = false;
    const second = await startDaemon(dir, ['--port', '0'], env);
    await waitFor(() => receiver.received.length === 2, { what: 'the retry after the restart', timeoutMs: 240_000 });
    expect(receiver.received[1]!.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id']);
    expect(new Webhook(SECRET).verify(receiver.received[1]!.body, receiver.received[1]!.headers)).toMatchObject({ data: { taskId, status: 'succeeded' } });
    await waitFor(
      async () => ((await (await api(second, 'GET', `/api/headless/${taskId}`)).json()) as { webhooks: Delivery[] }).webhooks[0]!.state === 'delivered',
      {
        what: 'the record to show it delivered',
      },
    );
    await second.stop();
  });

  it('a run the daemon died during is told as interrupted after the restart', async () => {
    const receiver = await startReceiver();
    const dir = tempDir();
    dirs.push(dir);
    // Retries to spare: on a loaded machine an attempt can time out, and that is not what this test is about.
    config(dir, receiver.url, [200, 1000, 5000, 15_000]);
    const env = { HEADLESS_WEBHOOK_SECRET: SECRET };
    const first = await startDaemon(dir, ['--port', '0'], env);
    const { taskId } = (await (await api(first, 'POST', '/api/workspaces/ws/headless', { prompt: 'sleep 30000', agent: 'fake' })).json()) as { taskId: string };
    expect(await first.stop('SIGKILL')).toBeNull();
    const second = await startDaemon(dir, ['--port', '0'], env);
    await waitRun(second, taskId);
    await waitFor(() => receiver.received.length === 1, { what: 'the delivery of the interrupted run' });
    expect(new Webhook(SECRET).verify(receiver.received[0]!.body, receiver.received[0]!.headers)).toMatchObject({ data: { taskId, status: 'interrupted' } });
    await second.stop();
  });

  it('refuses to start on a bad secret or a private workspace URL, naming it', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir, { workspaces: [{ id: 'ws', path: '.', webhook: { url: 'http://127.0.0.1:9/x' } }] });
    const privateUrl = await runCli(['serve', '--port', '0'], { cwd: dir, env: { HEADLESS_WEBHOOK_SECRET: SECRET } });
    expect(privateUrl.code).toBe(2);
    expect(privateUrl.stderr).toMatch(/workspace "ws" webhook URL http:\/\/127.0.0.1:9\/x: 127.0.0.1 is not a public address/);
    const badSecret = await runCli(['serve', '--port', '0'], { cwd: dir, env: { HEADLESS_WEBHOOK_SECRET: 'hunter2' } });
    expect(badSecret.code).toBe(2);
    expect(badSecret.stderr).toMatch(/webhooks.secret must be "whsec_"/);
    writeConfig(dir, { webhooks: { retryDelaysMs: [-1] } });
    const badDelays = await runCli(['serve', '--port', '0'], { cwd: dir });
    expect(badDelays.code).toBe(2);
    expect(badDelays.stderr).toMatch(/webhooks\.retryDelaysMs/);
  });
});
