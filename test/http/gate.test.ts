import { afterEach, describe, expect, it } from 'vitest';
import { HttpProblem } from '../../src/contract/problems';
import { createHeadlessHandler } from '../../src/core/handler';
import { FailedAttempts } from '../../src/core/http/failed-attempts';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';

/** docs/security.md: who is let in by the default gate, and what a peer that keeps guessing gets. */

afterEach(closeAllHosts);

const TOKEN = 'the-right-token-is-forty-characters-long';
const REMOTE = '203.0.113.9';

describe('the default gate', () => {
  it('localCallers "token": a local caller needs the token like anyone', async () => {
    const host = await createTestHost({ adminToken: TOKEN, localCallers: 'token' });
    expect((await host.request('GET', '/api/headless?wsId=ws')).status).toBe(401);
    expect((await host.request('GET', '/api/headless?wsId=ws', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    const trusting = await createTestHost({ adminToken: TOKEN });
    expect((await trusting.request('GET', '/api/headless?wsId=ws')).status).toBe(200);
  });

  it('refuses an admin token shorter than 32 characters, saying how to make one', () => {
    expect(() => createHeadlessHandler({ workspaces: [{ id: 'w', path: '/tmp' }], adminToken: 'short' })).toThrow(/at least 32 characters.*openssl rand/);
  });

  it('after 10 wrong tokens a peer gets 429 too_many_attempts with Retry-After, the right token included; other peers do not', async () => {
    const host = await createTestHost({ adminToken: TOKEN });
    const as = (remote: string, token: string) => host.request('GET', '/api/headless?wsId=ws', { remote, headers: { authorization: `Bearer ${token}` } });
    for (let i = 0; i < 10; i++) expect((await as(REMOTE, `wrong-${i}`)).status).toBe(401);
    const refused = await as(REMOTE, TOKEN);
    expect(await problem(refused)).toMatchObject({ status: 429, code: 'too_many_attempts' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await as('198.51.100.7', TOKEN)).status).toBe(200);
    // A local caller without a credential is not guessing: it is let in as before.
    expect((await host.request('GET', '/api/headless?wsId=ws')).status).toBe(200);
  });

  it('a local process is never locked out by another local one guessing (they share 127.0.0.1); a proxied request still counts', async () => {
    const host = await createTestHost({ adminToken: TOKEN, localCallers: 'token' });
    const local = (token: string, headers: Record<string, string> = {}) =>
      host.request('GET', '/api/headless?wsId=ws', { headers: { authorization: `Bearer ${token}`, ...headers } });
    for (let i = 0; i < 20; i++) expect((await local(`wrong-${i}`)).status).toBe(401);
    expect((await local(TOKEN)).status).toBe(200);
    // Through a proxy on this host every remote caller is 127.0.0.1 with a forwarding header: throttled as one peer.
    const proxied = { 'x-forwarded-for': REMOTE };
    for (let i = 0; i < 10; i++) expect((await local(`wrong-${i}`, proxied)).status).toBe(401);
    expect(await problem(await local(TOKEN, proxied))).toMatchObject({ status: 429, code: 'too_many_attempts' });
  });

  it('counts failures in a one-minute window: the peer is let try again once it has passed', () => {
    let now = 1_000_000;
    const attempts = new FailedAttempts(() => now);
    for (let i = 0; i < 10; i++) attempts.record('p');
    expect(() => attempts.check('p')).toThrow(HttpProblem);
    now += 59_000;
    expect(() => attempts.check('p')).toThrow(/try again in 1 s/);
    now += 1_000;
    expect(() => attempts.check('p')).not.toThrow();
    attempts.record('p');
    expect(() => attempts.check('p')).not.toThrow();
  });
});
