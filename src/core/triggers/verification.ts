import { createHmac, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../util/ids';

/** How a sender proves a delivery is its own (docs/triggers.md: Verification). */
export type VerifySettings =
  /** `X-Hub-Signature-256: sha256=<hex>` of the body. */
  | { method: 'github' }
  /** `X-Gitlab-Token`: the secret itself. */
  | { method: 'gitlab-token' }
  /** `webhook-id`, `webhook-timestamp`, `webhook-signature` (GitLab signing tokens, Svix, incident.io), 5 minutes' tolerance. */
  | { method: 'standard-webhooks' }
  /** `Sentry-Hook-Signature`: hex HMAC-SHA256 of the body. */
  | { method: 'sentry' }
  /** `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>]`: any one of them (a secret being rotated). */
  | { method: 'pagerduty' }
  /** Grafana's HMAC: hex of the body, or of `<timestamp>:<body>` where a timestamp header is set. */
  | { method: 'grafana'; header?: string; timestampHeader?: string; toleranceSeconds?: number }
  /** Any HMAC: header, algorithm, encoding, prefix, and optionally a signed timestamp (`<timestamp><separator><body>`). */
  | {
      method: 'hmac';
      header: string;
      algorithm?: 'sha256' | 'sha1' | 'sha512';
      encoding?: 'hex' | 'base64';
      prefix?: string;
      timestampHeader?: string;
      separator?: string;
      toleranceSeconds?: number;
    }
  /** `X-Slack-Signature: v0=<hex>` of `v0:<X-Slack-Request-Timestamp>:<body>`, keyed by the signing secret; 5 minutes' tolerance. */
  | { method: 'slack' }
  /** `Linear-Signature`: hex HMAC-SHA256 of the body; the body's `webhookTimestamp` (ms) within 60 seconds. */
  | { method: 'linear' }
  /** `Authorization: Bearer <secret>` (Alertmanager's `authorization`, Datadog, Opsgenie). */
  | { method: 'bearer' }
  /** `Authorization: Basic` with this user name and the secret as password (Alertmanager's `basic_auth`). */
  | { method: 'basic'; username: string };

export const VERIFY_METHODS = [
  'github',
  'gitlab-token',
  'standard-webhooks',
  'sentry',
  'pagerduty',
  'grafana',
  'slack',
  'linear',
  'hmac',
  'bearer',
  'basic',
] as const;

/** Slack's tolerance for `X-Slack-Request-Timestamp`, as its docs and SDKs use. */
const SLACK_TOLERANCE_S = 300;
/** Linear's for `webhookTimestamp`: the one minute its docs recommend and its SDK checks. */
const LINEAR_TOLERANCE_S = 60;

/** Equal, in time that does not depend on where they differ (both hashed first, so lengths leak nothing). */
const same = (a: string, b: string) => timingSafeEqual(Buffer.from(sha256(a), 'hex'), Buffer.from(sha256(b), 'hex'));

const hmac = (algorithm: string, secret: string | Buffer, data: string, encoding: 'hex' | 'base64') =>
  createHmac(algorithm, secret).update(data, 'utf8').digest(encoding);

/**
 * One HMAC pass over the body, for a check that would not otherwise read it (a token, a missing
 * header): every check, of any method and any outcome, then costs about one pass over the body,
 * so the time of a refusal says nothing of which trigger, if any, refused it (docs/triggers.md).
 */
function passOver(secret: string, body: string): void {
  hmac('sha256', secret, body, 'hex');
}

/** A signed timestamp within tolerance (seconds since the epoch, or milliseconds). */
function fresh(timestamp: string | null, toleranceSeconds: number, now: number): boolean {
  if (timestamp === null || !/^\d{1,16}$/.test(timestamp)) return false;
  const value = Number(timestamp);
  const ms = value > 1e12 ? value : value * 1000;
  return Math.abs(now - ms) <= toleranceSeconds * 1000;
}

interface Signed {
  header: string;
  algorithm: string;
  encoding: 'hex' | 'base64';
  prefix: string;
  timestampHeader?: string;
  separator: string;
  toleranceSeconds: number;
  /** The header may list several signatures, comma-separated: any one may match. */
  several?: boolean;
}

function verifyHmac(s: Signed, secret: string, body: string, headers: Headers, now: number): boolean {
  const given = headers.get(s.header);
  let data = body;
  let inTime = true;
  if (s.timestampHeader !== undefined) {
    const timestamp = headers.get(s.timestampHeader);
    inTime = fresh(timestamp, s.toleranceSeconds, now);
    data = `${timestamp ?? ''}${s.separator}${body}`;
  }
  // Computed even without a signature or in time, so a refusal takes as long whatever was missing.
  const expected = `${s.prefix}${hmac(s.algorithm, secret, data, s.encoding)}`;
  const candidates = given === null ? [] : s.several ? given.split(',').map((part) => part.trim()) : [given.trim()];
  // Every candidate is compared, so the time taken does not say which one matched.
  return candidates.map((candidate) => same(candidate, expected)).includes(true) && inTime;
}

/**
 * Standard Webhooks (standardwebhooks.com): `v1,<base64 HMAC-SHA256>` entries, space-separated, over
 * `<id>.<timestamp>.<body>`, keyed by the `whsec_` secret's bytes; 5 minutes' tolerance either way.
 * Node's HMAC, as every other check, so it takes as long as they do.
 */
function verifyStandard(secret: string, body: string, headers: Headers, now: number): boolean {
  const id = headers.get('webhook-id') ?? '';
  const timestamp = headers.get('webhook-timestamp');
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  const expected = hmac('sha256', key, `${id}.${timestamp ?? ''}.${body}`, 'base64');
  const candidates = (headers.get('webhook-signature') ?? '').split(' ').map((entry) => (entry.startsWith('v1,') ? entry.slice(3) : ''));
  const signed = candidates.map((candidate) => candidate !== '' && same(candidate, expected)).includes(true);
  // Seconds only (the spec's), within 5 minutes either way.
  return signed && id !== '' && /^\d{1,12}$/.test(timestamp ?? '') && fresh(timestamp, 300, now);
}

/**
 * Slack: `v0=` and the hex HMAC-SHA256 of `v0:<timestamp>:<body>`; the timestamp (seconds) within
 * 5 minutes either way. Hashed even when the timestamp is stale or missing, as every check is.
 */
function verifySlack(secret: string, body: string, headers: Headers, now: number): boolean {
  const timestamp = headers.get('x-slack-request-timestamp');
  const expected = `v0=${hmac('sha256', secret, `v0:${timestamp ?? ''}:${body}`, 'hex')}`;
  const signed = same((headers.get('x-slack-signature') ?? '').trim(), expected);
  return signed && /^\d{1,12}$/.test(timestamp ?? '') && fresh(timestamp, SLACK_TOLERANCE_S, now);
}

/**
 * Linear: the hex HMAC-SHA256 of the body in `Linear-Signature`; its time is inside the signed
 * body (`webhookTimestamp`, ms), read only once the signature matched, so an unsigned body is
 * never parsed.
 */
function verifyLinear(secret: string, body: string, headers: Headers, now: number): boolean {
  const signed = same((headers.get('linear-signature') ?? '').trim(), hmac('sha256', secret, body, 'hex'));
  if (!signed) return false;
  let timestamp: unknown;
  try {
    timestamp = (JSON.parse(body) as { webhookTimestamp?: unknown }).webhookTimestamp;
  } catch {
    return false;
  }
  return typeof timestamp === 'number' && Number.isInteger(timestamp) && Math.abs(now - timestamp) <= LINEAR_TOLERANCE_S * 1000;
}

/**
 * The senders whose HMAC scheme is fixed: GitHub's `sha256=` hex of the body (as
 * @octokit/webhooks-methods signs it: the tests sign with it); Sentry's hex of the body;
 * PagerDuty's `v1=` entries, any of which may match.
 */
const SIGNED: Record<'github' | 'sentry' | 'pagerduty', Signed> = {
  github: { header: 'x-hub-signature-256', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=', separator: '', toleranceSeconds: 0 },
  sentry: { header: 'sentry-hook-signature', algorithm: 'sha256', encoding: 'hex', prefix: '', separator: '', toleranceSeconds: 0 },
  pagerduty: { header: 'x-pagerduty-signature', algorithm: 'sha256', encoding: 'hex', prefix: 'v1=', separator: '', toleranceSeconds: 0, several: true },
};

function basicMatches(header: string | null, username: string, secret: string): boolean {
  if (header === null || !/^basic /i.test(header)) return false;
  return same(header.slice(6).trim(), Buffer.from(`${username}:${secret}`, 'utf8').toString('base64'));
}

/** Whether the delivery carries the sender's proof, checked on the raw body, in constant time. */
export function verifyDelivery(settings: VerifySettings, secret: string, body: string, headers: Headers, now = Date.now()): boolean {
  switch (settings.method) {
    case 'github':
    case 'sentry':
    case 'pagerduty':
      return verifyHmac(SIGNED[settings.method], secret, body, headers, now);
    case 'gitlab-token': {
      const matches = same(headers.get('x-gitlab-token') ?? '', secret);
      passOver(secret, body);
      return matches;
    }
    case 'standard-webhooks':
      return verifyStandard(secret, body, headers, now);
    case 'slack':
      return verifySlack(secret, body, headers, now);
    case 'linear':
      return verifyLinear(secret, body, headers, now);
    case 'grafana': {
      // Grafana's docs name one default header and its code another: either is taken unless one is set.
      const header = settings.header ?? (headers.has('x-grafana-alerting-signature') ? 'x-grafana-alerting-signature' : 'x-grafana-alert-signature');
      const signed = { header, algorithm: 'sha256', encoding: 'hex' as const, prefix: '', separator: ':', toleranceSeconds: settings.toleranceSeconds ?? 300 };
      return verifyHmac({ ...signed, timestampHeader: settings.timestampHeader }, secret, body, headers, now);
    }
    case 'hmac':
      return verifyHmac(
        {
          header: settings.header,
          algorithm: settings.algorithm ?? 'sha256',
          encoding: settings.encoding ?? 'hex',
          prefix: settings.prefix ?? '',
          timestampHeader: settings.timestampHeader,
          separator: settings.separator ?? '.',
          toleranceSeconds: settings.toleranceSeconds ?? 300,
        },
        secret,
        body,
        headers,
        now,
      );
    case 'bearer': {
      const header = headers.get('authorization') ?? '';
      const matches = same(header.slice(7).trim(), secret) && /^bearer /i.test(header);
      passOver(secret, body);
      return matches;
    }
    case 'basic': {
      const matches = basicMatches(headers.get('authorization'), settings.username, secret);
      passOver(secret, body);
      return matches;
    }
  }
}
