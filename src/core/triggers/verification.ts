import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { sha256 } from '../util/ids';

/** How a sender proves a delivery is its own (docs/triggers.md: Verification). */
export type VerifySettings =
  /** `X-Hub-Signature-256: sha256=<hex>` of the body (@octokit/webhooks-methods). */
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
  /** `Authorization: Bearer <secret>` (Alertmanager's `authorization`, Datadog, Opsgenie). */
  | { method: 'bearer' }
  /** `Authorization: Basic` with this user name and the secret as password (Alertmanager's `basic_auth`). */
  | { method: 'basic'; username: string };

export const VERIFY_METHODS = ['github', 'gitlab-token', 'standard-webhooks', 'sentry', 'pagerduty', 'grafana', 'hmac', 'bearer', 'basic'] as const;

/** Equal, in time that does not depend on where they differ (both hashed first, so lengths leak nothing). */
const same = (a: string, b: string) => timingSafeEqual(Buffer.from(sha256(a), 'hex'), Buffer.from(sha256(b), 'hex'));

const hmac = (algorithm: string, secret: string, data: string, encoding: 'hex' | 'base64') =>
  createHmac(algorithm, secret).update(data, 'utf8').digest(encoding);

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
  if (given === null) return false;
  let data = body;
  if (s.timestampHeader !== undefined) {
    const timestamp = headers.get(s.timestampHeader);
    if (!fresh(timestamp, s.toleranceSeconds, now)) return false;
    data = `${timestamp}${s.separator}${body}`;
  }
  const expected = `${s.prefix}${hmac(s.algorithm, secret, data, s.encoding)}`;
  const candidates = s.several ? given.split(',').map((part) => part.trim()) : [given.trim()];
  // Every candidate is compared, so the time taken does not say which one matched.
  return candidates.map((candidate) => same(candidate, expected)).includes(true);
}

/** The senders whose HMAC scheme is fixed: Sentry's hex of the body; PagerDuty's `v1=` entries, any of which may match. */
const SIGNED: Record<'sentry' | 'pagerduty', Signed> = {
  sentry: { header: 'sentry-hook-signature', algorithm: 'sha256', encoding: 'hex', prefix: '', separator: '', toleranceSeconds: 0 },
  pagerduty: { header: 'x-pagerduty-signature', algorithm: 'sha256', encoding: 'hex', prefix: 'v1=', separator: '', toleranceSeconds: 0, several: true },
};

function basicMatches(header: string | null, username: string, secret: string): boolean {
  if (header === null || !/^basic /i.test(header)) return false;
  return same(header.slice(6).trim(), Buffer.from(`${username}:${secret}`, 'utf8').toString('base64'));
}

/** Whether the delivery carries the sender's proof, checked on the raw body, in constant time. */
export async function verifyDelivery(settings: VerifySettings, secret: string, body: string, headers: Headers, now = Date.now()): Promise<boolean> {
  switch (settings.method) {
    case 'github': {
      const signature = headers.get('x-hub-signature-256');
      // An ES module only: imported when a GitHub trigger is used, so the CommonJS build loads without it.
      const { verify } = await import('@octokit/webhooks-methods');
      return signature !== null && (await verify(secret, body, signature).catch(() => false));
    }
    case 'gitlab-token':
      return same(headers.get('x-gitlab-token') ?? '', secret);
    case 'standard-webhooks':
      try {
        new Webhook(secret).verify(body, Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, headers.get(h) ?? ''])));
        return true;
      } catch {
        return false;
      }
    case 'sentry':
    case 'pagerduty':
      return verifyHmac(SIGNED[settings.method], secret, body, headers, now);
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
      return /^bearer /i.test(header) && same(header.slice(7).trim(), secret);
    }
    case 'basic':
      return basicMatches(headers.get('authorization'), settings.username, secret);
  }
}
