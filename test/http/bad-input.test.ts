import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, START, rows } from '../helpers/bad-inputs';
import { type RequestOptions, type TestHost, createTestHost } from '../helpers/harness';

/** Reliability-security §4.1 and §4.2: every bad input gets its status and code, and starts nothing. */

let host: TestHost;
beforeAll(async () => {
  host = await createTestHost({ adminToken: ADMIN_TOKEN });
});
afterAll(async () => host.close());

describe('bad inputs', () => {
  it('has at least 60 rows', () => {
    expect(rows.length).toBeGreaterThanOrEqual(60);
  });

  it.each(rows)('$name → $status $code, no process, nothing stored', async (row) => {
    const before = host.spawner.count;
    const res = await host.request(row.method ?? 'POST', row.path ?? START, row.options);
    const text = await res.text();
    expect(res.status, text).toBe(row.status);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    const body = JSON.parse(text) as { code: string; status: number; detail: string };
    expect(body.code).toBe(row.code);
    expect(body.status).toBe(row.status);
    expect(text).not.toContain('admin-secret-token-value');
    expect(host.spawner.count).toBe(before);
    if (row.status === 401) expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('stored no run and no Session for any of them', async () => {
    const list = (await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: unknown[] };
    expect(list.runs).toEqual([]);
  });

  it('401 bodies are identical whatever token was presented', async () => {
    const bodies = new Set<string>();
    for (const authorization of [undefined, 'Bearer x', 'Bearer admin-secret-token-valuX', `Bearer ${'a'.repeat(500)}`]) {
      const res = await host.request('GET', '/api/headless?wsId=ws', { remote: '203.0.113.9', headers: authorization ? { authorization } : {} });
      bodies.add(`${res.status} ${await res.text()}`);
    }
    expect(bodies.size).toBe(1);
  });

  it('names the unknown field in the detail', async () => {
    const res = await host.request('POST', START, { json: { prompt: 'x', cwd: '/' } });
    expect(((await res.json()) as { detail: string }).detail).toContain('"cwd"');
  });
});

describe('accepted callers', () => {
  it.each([
    ['Host 127.0.0.1:47331', { headers: { host: '127.0.0.1:47331' } }],
    ['Host localhost', { headers: { host: 'localhost' } }],
    ['Host [::1]:47331', { headers: { host: '[::1]:47331' } }],
    ['peer ::1', { remote: '::1' }],
    ['peer ::ffff:127.0.0.1', { remote: '::ffff:127.0.0.1' }],
    ['Origin http://localhost:47331', { headers: { origin: 'http://localhost:47331' } }],
    ['Sec-Fetch-Site none', { headers: { 'sec-fetch-site': 'none' } }],
    ['Sec-Fetch-Site same-origin', { headers: { 'sec-fetch-site': 'same-origin' } }],
    ['remote peer with the admin token', { remote: '203.0.113.9', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }],
    ['forwarded request with the admin token', { headers: { 'x-forwarded-for': '198.51.100.1', authorization: `Bearer ${ADMIN_TOKEN}` } }],
  ] as Array<[string, RequestOptions]>)('%s → 200', async (_name, options) => {
    const res = await host.request('GET', '/api/headless?wsId=ws', options);
    expect(res.status, await res.text()).toBe(200);
  });

  it('publicHosts are accepted Host names; other non-local callers still need the token', async () => {
    const proxied = await createTestHost({ publicHosts: ['agents.example.com'], adminToken: 't0ken-long-enough-for-the-minimum-length' });
    const ok = await proxied.request('GET', '/api/headless?wsId=ws', {
      remote: '203.0.113.9',
      headers: { host: 'agents.example.com', authorization: 'Bearer t0ken-long-enough-for-the-minimum-length' },
    });
    expect(ok.status).toBe(200);
    const noToken = await proxied.request('GET', '/api/headless?wsId=ws', { remote: '203.0.113.9', headers: { host: 'agents.example.com' } });
    expect(noToken.status).toBe(401);
    await proxied.close();
  });

  it('without an admin token configured, non-local callers always get 401', async () => {
    const open = await createTestHost();
    const res = await open.request('GET', '/api/headless?wsId=ws', { remote: '203.0.113.9', headers: { authorization: 'Bearer anything' } });
    expect(res.status).toBe(401);
    await open.close();
  });

  it('an authorize hook replaces the gate', async () => {
    const hooked = await createTestHost({ authorize: (request) => request.headers.get('x-api-key') === 'k1' });
    expect(
      (await hooked.request('GET', '/api/headless?wsId=ws', { remote: '203.0.113.9', headers: { host: 'gateway.internal', 'x-api-key': 'k1' } })).status,
    ).toBe(200);
    expect((await hooked.request('GET', '/api/headless?wsId=ws', { headers: { 'x-api-key': 'nope' } })).status).toBe(401);
    await hooked.close();
  });
});
