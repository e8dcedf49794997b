import { type LookupAddress, lookup } from 'node:dns';
// The modules, not their functions: `request` is looked up per call, as instrumentation (and msw) expect.
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may go, and the one HTTP POST that delivers it. Targets on loopback,
 * link-local, private and other non-public addresses are refused unless the installation allows
 * them: checked on the URL, and again on every address the name resolves to at connect time
 * (so DNS cannot point a public name at an inside address). Redirects are never followed.
 */

const URL_MAX = 2048;

/** Address ranges that are not the public internet. */
const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  // Ranges that carry an IPv4 address inside (so any IPv4 target, private ones too): IPv4-compatible,
  // local-use NAT64, 6to4; and the deprecated site-local range.
  ['::', 96],
  ['64:ff9b:1::', 48],
  ['2002::', 16],
  ['fec0::', 10],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, 'ipv6');
}

/** The IPv4 address inside an IPv4-mapped IPv6 one (`::ffff:1.2.3.4` or `::ffff:102:304`). */
function mappedIpv4(address: string): string | undefined {
  const [, dotted, high, low] = /^::ffff:(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address) ?? [];
  if (dotted) return dotted;
  if (high === undefined || low === undefined) return undefined;
  const hi = parseInt(high, 16);
  const lo = parseInt(low, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export function isNonPublicAddress(address: string): boolean {
  const v4 = isIP(address) === 6 ? mappedIpv4(address) : address;
  if (v4 !== undefined && isIP(v4) === 4) return NON_PUBLIC.check(v4, 'ipv4');
  return isIP(address) === 6 ? NON_PUBLIC.check(address, 'ipv6') : true;
}

/** A target that is never tried again: refused by the guard, or unusable as given. */
export class RefusedTarget extends Error {
  readonly code = 'ERR_WEBHOOK_TARGET_REFUSED';
}

/** Checks a webhook URL as given; the reason is thrown as a `RefusedTarget`. */
export function checkWebhookUrl(raw: string, allowPrivate: boolean): URL {
  if (raw.length > URL_MAX) throw new RefusedTarget(`the URL is longer than ${URL_MAX} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RefusedTarget('it is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RefusedTarget('only http and https URLs are allowed');
  if (url.username || url.password) throw new RefusedTarget('credentials in the URL are not allowed');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && isIP(host) !== 0 && isNonPublicAddress(host)) {
    throw new RefusedTarget(`${host} is not a public address (the installation does not allow private webhook targets)`);
  }
  return url;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** `dns.lookup`, refusing a name any of whose addresses is not public. */
function guardedLookup(hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback): void {
  lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const inside = addresses.find((a) => isNonPublicAddress(a.address));
    if (inside) return callback(new RefusedTarget(`${hostname} resolves to ${inside.address}, which is not a public address`), []);
    if (options.all) return callback(null, addresses);
    const [first] = addresses;
    if (!first) return callback(new RefusedTarget(`${hostname} resolves to no address`), []);
    callback(null, first.address, first.family);
  });
}

export interface PostOptions {
  allowPrivate: boolean;
  /** Bounds the whole attempt: connect, send and the answer. */
  timeoutMs: number;
  /** Aborts the attempt (the service is closing). */
  signal: AbortSignal;
  /** How much of the answer is kept. @default 200 */
  answerMax?: number;
}

/** A kept excerpt of the receiver's answer, for the delivery state. */
const ANSWER_MAX = 200;

/** POSTs `body` once; resolves with the status and the start of the answer, rejects on a network error or timeout. */
export function postWebhook(url: URL, headers: Record<string, string>, body: string, o: PostOptions): Promise<{ status: number; answer: string }> {
  const signal = AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)]);
  const send = url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        signal,
        ...(o.allowPrivate ? {} : { lookup: guardedLookup as never }),
      },
      (res) => {
        let answer = '';
        const max = o.answerMax ?? ANSWER_MAX;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (answer.length < max) answer += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, answer: answer.slice(0, max) }));
        res.on('error', reject);
      },
    );
    req.on('error', (error) => reject(signal.aborted && !o.signal.aborted ? new Error(`no answer within ${o.timeoutMs} ms`) : error));
    req.end(body);
  });
}
