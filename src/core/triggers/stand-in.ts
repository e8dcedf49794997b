import { randomBytes } from 'node:crypto';
import type { VerifySettings } from './verification';

/**
 * What a delivery to a name with no enabled trigger is checked against, so that its refusal takes
 * the work a real trigger's does (docs/triggers.md: Verification): the method of the sender its
 * headers claim, and a secret of this process's that no one knows. The answer is refused whatever
 * the check says.
 */
export interface StandIn {
  verify: VerifySettings;
  secret: string;
}

/** Random bytes in base64: a usable key for every method, Standard Webhooks' included. */
const SECRET = randomBytes(32).toString('base64');

/** Each sender's signature header, first match wins; anything else is checked as a generic HMAC. */
const CLAIMS: Array<[header: string, verify: VerifySettings]> = [
  ['x-hub-signature-256', { method: 'github' }],
  ['x-gitlab-token', { method: 'gitlab-token' }],
  ['webhook-signature', { method: 'standard-webhooks' }],
  ['sentry-hook-signature', { method: 'sentry' }],
  ['x-pagerduty-signature', { method: 'pagerduty' }],
  ['x-grafana-alerting-signature', { method: 'grafana' }],
  ['x-grafana-alert-signature', { method: 'grafana' }],
  ['x-slack-signature', { method: 'slack' }],
  ['linear-signature', { method: 'linear' }],
];

export function standIn(headers: Headers): StandIn {
  const claimed = CLAIMS.find(([header]) => headers.has(header))?.[1];
  const authorization = headers.get('authorization');
  const verify: VerifySettings =
    claimed ??
    (authorization === null
      ? { method: 'hmac', header: 'x-signature' }
      : /^basic /i.test(authorization)
        ? { method: 'basic', username: 'stand-in' }
        : { method: 'bearer' });
  return { verify, secret: SECRET };
}
