import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TriggerDefinition } from '../../src/core/triggers/trigger-spec';
import { closeAllHosts, createTestHost } from '../helpers/harness';

/**
 * docs/triggers.md, Verification: a delivery refused for its signature gets the same answer, after
 * the same work, whether its trigger exists or not. Time is not measured (it depends on the
 * machine); the work is: every HMAC the service computes is seen here, and each refusal makes
 * exactly one pass over the body, whatever the name, the trigger's method or the headers sent.
 */
const seen = vi.hoisted(() => ({ hashed: [] as string[] }));
vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  const createHmac = (...args: Parameters<typeof actual.createHmac>) => {
    const hmac = actual.createHmac(...args);
    const update = hmac.update.bind(hmac);
    hmac.update = ((data: string, encoding: BufferEncoding) => {
      seen.hashed.push(String(data));
      return update(data, encoding);
    }) as typeof hmac.update;
    return hmac;
  };
  return { ...actual, createHmac };
});

afterEach(closeAllHosts);

const BODY = JSON.stringify({ filler: 'x'.repeat(8192), marker: 'a body this test alone sends' });
const passesOverBody = () => seen.hashed.filter((data) => data.includes(BODY)).length;

const t = (name: string, sender: TriggerDefinition['sender'], extra: Partial<TriggerDefinition> = {}): TriggerDefinition => ({
  name,
  workspace: 'ws',
  sender,
  run: { agent: 'fake' },
  secret: 'the-real-secret',
  prompt: 'x',
  ...extra,
});

/** One trigger of each verification method, and a disabled one. */
const TRIGGERS = [
  t('github', 'github'),
  t('gitlab', 'gitlab'),
  t('sentry', 'sentry'),
  t('pagerduty', 'pagerduty'),
  t('svix', 'standard-webhooks', { secret: `whsec_${Buffer.from('a standard webhooks key of 32 b!').toString('base64')}` }),
  t('grafana', 'grafana', { verify: { method: 'grafana', timestampHeader: 'x-grafana-alerting-signature-timestamp' } }),
  t('hmac', 'generic', { verify: { method: 'hmac', header: 'x-signature', prefix: 'sha256=' } }),
  t('alerts', 'alertmanager'),
  t('basic', 'alertmanager', { verify: { method: 'basic', username: 'am' } }),
  t('off', 'generic', { verify: { method: 'bearer' }, enabled: false }),
];

/** What an outsider might send, each shaped as one sender's, none of them right. */
const now = String(Math.floor(Date.now() / 1000));
const SHAPES: Record<string, Record<string, string>> = {
  none: {},
  github: { 'x-github-event': 'issues', 'x-github-delivery': 'd-1', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
  gitlab: { 'x-gitlab-token': 'a-guess' },
  sentry: { 'sentry-hook-signature': '0'.repeat(64), 'request-id': 'r-1' },
  pagerduty: { 'x-pagerduty-signature': `v1=${'0'.repeat(64)}`, 'x-webhook-id': 'w-1' },
  'standard-webhooks': { 'webhook-id': 'msg_1', 'webhook-timestamp': now, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` },
  'stale standard-webhooks': { 'webhook-id': 'msg_1', 'webhook-timestamp': '1000', 'webhook-signature': 'v1,AAAA' },
  grafana: { 'x-grafana-alerting-signature': '0'.repeat(64), 'x-grafana-alerting-signature-timestamp': now },
  bearer: { authorization: 'Bearer a-guess' },
  basic: { authorization: `Basic ${Buffer.from('am:a-guess').toString('base64')}` },
};

describe('a refused delivery, whether its trigger exists or not', () => {
  it('gets the same answer after one pass over its body, for every method and every shape of request', async () => {
    const host = await createTestHost({ triggers: TRIGGERS });
    const names = [...TRIGGERS.map((d) => d.name), 'no-such-trigger'];
    let peer = 0;
    const answers = new Set<string>();
    for (const [shape, headers] of Object.entries(SHAPES)) {
      for (const name of names) {
        seen.hashed.length = 0;
        // A new peer address each time: the per-peer throttle is another test's.
        peer += 1;
        const res = await host.request('POST', `/api/triggers/${name}`, {
          body: BODY,
          headers: { 'content-type': 'application/json', ...headers },
          remote: `192.0.2.${peer % 250}`,
        });
        answers.add(JSON.stringify({ status: res.status, type: res.headers.get('content-type'), body: await res.json() }));
        expect({ shape, name, passes: passesOverBody() }).toEqual({ shape, name, passes: 1 });
      }
    }
    expect([...answers]).toEqual([
      JSON.stringify({
        status: 401,
        type: 'application/problem+json',
        body: {
          type: 'https://headless-run-webhook.dev/problems/unauthorized',
          title: 'Unauthorized',
          status: 401,
          detail: 'This delivery could not be verified.',
          code: 'unauthorized',
        },
      }),
    ]);
  });
});
