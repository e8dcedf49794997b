import { Keyv } from 'keyv';
// @ts-expect-error the parser ships no types
import parsePrometheus from 'parse-prometheus-text-format';
import { afterEach, describe, expect, it } from 'vitest';
import { version } from '../../package.json';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';

/** docs/deployment.md: health and readiness for probes, HEAD wherever GET works, the version, the metrics. */

afterEach(() => closeAllHosts());

const REMOTE = { remote: '203.0.113.9', headers: { host: 'lb-probe.internal:8080' } };

/** A Keyv store whose reads can be made to fail, as an unreachable database's do. */
function switchableKeyv() {
  const map = new Map<string, unknown>();
  const state = { down: false };
  const check = <T>(answer: () => T): T => {
    if (state.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    return answer();
  };
  const store = {
    opts: { dialect: 'sqlite', url: '' },
    namespace: undefined as string | undefined,
    get: async (key: string) => check(() => map.get(key)),
    set: async (key: string, value: unknown) => check(() => Boolean(map.set(key, value))),
    delete: async (key: string) => check(() => map.delete(key)),
    clear: async () => map.clear(),
    iterator: async function* () {
      yield* map.entries();
    },
    on: () => store,
  };
  return { keyv: new Keyv({ store: store as never, namespace: 'hrw', throwOnErrors: true }), state };
}

describe('probes', () => {
  it('/healthz and /readyz answer anyone, with any Host and no credential, even with an admin token set', async () => {
    const host = await createTestHost({ adminToken: 'secret-token-for-the-test-0123456789' });
    const live = await host.request('GET', '/healthz', REMOTE);
    expect([live.status, await live.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await host.request('GET', '/readyz', REMOTE);
    expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready' }]);
    // Everything else is still behind the gate.
    expect((await host.request('GET', '/api/version', REMOTE)).status).toBe(403);
    expect((await host.request('GET', '/api/version', { remote: '203.0.113.9' })).status).toBe(401);
  });

  it('/readyz is 503 not_ready while the store does not answer, and ready again once it does; /healthz stays 200', async () => {
    const { keyv, state } = switchableKeyv();
    const host = await createTestHost({ store: keyv });
    state.down = true;
    const refused = await host.request('GET', '/readyz');
    expect(await problem(refused)).toMatchObject({ status: 503, code: 'not_ready', contentType: 'application/problem+json' });
    expect((await host.request('GET', '/healthz')).status).toBe(200);
    state.down = false;
    expect((await host.request('GET', '/readyz')).status).toBe(200);
  });

  it('/api/version is the package version', async () => {
    const host = await createTestHost();
    expect(await (await host.request('GET', '/api/version')).json()).toEqual({ version });
  });
});

describe('HEAD', () => {
  it('answers wherever GET does, with its status and headers and no body', async () => {
    const host = await createTestHost();
    const { taskId } = await host.start('echo hi');
    await host.waitEnded(taskId);
    for (const path of ['/api/headless?wsId=ws', `/api/headless/${taskId}`, `/api/headless/${taskId}/events`, '/healthz', '/openapi.json', '/']) {
      const get = await host.request('GET', path);
      const head = await host.request('HEAD', path);
      expect([path, head.status, head.headers.get('content-type')]).toEqual([path, get.status, get.headers.get('content-type')]);
      expect(await head.text()).toBe('');
      await get.body?.cancel();
    }
  });

  it('is 404, 405 and 401 where GET would be, without a body', async () => {
    const host = await createTestHost();
    const missing = await host.request('HEAD', '/api/headless/run_nope');
    expect([missing.status, await missing.text()]).toEqual([404, '']);
    const postOnly = await host.request('HEAD', '/api/headless/run_nope/cancel');
    expect([postOnly.status, postOnly.headers.get('allow')]).toEqual([405, 'POST']);
    expect((await host.request('HEAD', '/api/headless?wsId=ws', { remote: '203.0.113.9' })).status).toBe(401);
  });
});

describe('GET /metrics', () => {
  const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
  const value = (text: string, line: string) => Number(new RegExp(`^${line.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);

  it('counts runs by agent, workspace and status, their durations, what runs now, and webhook attempts; behind the gate', async () => {
    const receiver = await startReceiver((index) => (index === 0 ? 503 : 200));
    const host = await createTestHost({ webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true, retryDelaysMs: [50] } });
    const ok = await host.start('echo hi', { webhook: { url: receiver.url } });
    const bad = await host.start('exit 3');
    await host.waitEnded(ok.taskId);
    await host.waitEnded(bad.taskId);
    const held = await host.start('sleep 30000');
    await waitFor(async () => receiver.received.length === 2, { what: 'the retried webhook' });
    const read = async () => (await host.request('GET', '/metrics')).text();
    await waitFor(async () => value(await read(), 'headless_webhook_attempts_total{outcome="delivered"}') === 1, { what: 'the delivery to be counted' });
    const res = await host.request('GET', '/metrics');
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(value(text, 'headless_runs_started_total{agent="fake",workspace="ws"}')).toBe(3);
    expect(value(text, 'headless_runs_ended_total{agent="fake",workspace="ws",status="succeeded"}')).toBe(1);
    expect(value(text, 'headless_runs_ended_total{agent="fake",workspace="ws",status="failed"}')).toBe(1);
    expect(value(text, 'headless_runs_running')).toBe(1);
    expect(value(text, 'headless_run_duration_seconds_count{agent="fake",status="succeeded"}')).toBe(1);
    expect(value(text, 'headless_webhook_attempts_total{outcome="retried"}')).toBe(1);
    expect(value(text, 'headless_webhook_delivery_lag_seconds_count')).toBe(1);
    expect(text).toContain('headless_process_cpu_user_seconds_total');
    // As a Prometheus server would read it: every family parses, with its type.
    const families = parsePrometheus(text) as Array<{ name: string; type: string; metrics: unknown[] }>;
    const byName = new Map(families.map((f) => [f.name, f]));
    expect(byName.get('headless_runs_ended_total')).toMatchObject({ type: 'COUNTER' });
    expect(byName.get('headless_run_duration_seconds')).toMatchObject({ type: 'HISTOGRAM' });
    expect(byName.get('headless_runs_running')).toMatchObject({ type: 'GAUGE' });
    expect((await host.request('GET', '/metrics', { remote: '203.0.113.9' })).status).toBe(401);
    await host.request('POST', `/api/headless/${held.taskId}/cancel`);
    await host.waitEnded(held.taskId);
    expect(value(await read(), 'headless_runs_running')).toBe(0);
    await receiver.close();
  });
});

describe("the status page's icon", () => {
  it('is an SVG at /favicon.ico, linked by the page, behind the same gate', async () => {
    const host = await createTestHost();
    const icon = await host.request('GET', '/favicon.ico');
    expect([icon.status, icon.headers.get('content-type')]).toEqual([200, 'image/svg+xml']);
    expect(await icon.text()).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(await (await host.request('GET', '/')).text()).toContain('<link rel="icon" href="favicon.ico" type="image/svg+xml">');
    expect((await host.request('GET', '/favicon.ico', { remote: '203.0.113.9' })).status).toBe(401);
  });
});
