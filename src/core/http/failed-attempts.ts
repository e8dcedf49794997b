import { HttpProblem } from '../../contract/problems';
import { BoundedCache } from '../util/bounded-cache';

/** Wrong credentials a peer may send within a window before it is refused for the rest of it. */
const LIMIT = 10;
const WINDOW_MS = 60_000;
/** Peers remembered at once: a flood of addresses pushes out the oldest, never grows memory. */
const PEERS = 10_000;

/**
 * Wrong admin tokens per peer address (docs/security.md: Credentials). After 10 in a minute the
 * address gets `429 too_many_attempts` until that minute is over, whatever it sends. Behind a
 * proxy every request has the proxy's address: throttle there too.
 */
export class FailedAttempts {
  private readonly peers = new BoundedCache<string, { since: number; count: number }>(PEERS);

  constructor(private readonly now: () => number = Date.now) {}

  /** Refuses a peer over the limit. */
  check(address: string | undefined): void {
    const entry = this.current(address);
    if (entry && entry.count >= LIMIT) {
      const seconds = Math.ceil((entry.since + WINDOW_MS - this.now()) / 1000);
      throw new HttpProblem('too_many_attempts', `Too many wrong credentials from this address; try again in ${seconds} s.`, {
        headers: { 'retry-after': String(seconds) },
      });
    }
  }

  record(address: string | undefined): void {
    const entry = this.current(address) ?? { since: this.now(), count: 0 };
    this.peers.set(peerOf(address), { ...entry, count: entry.count + 1 });
  }

  private current(address: string | undefined) {
    const entry = this.peers.get(peerOf(address));
    return entry && this.now() - entry.since < WINDOW_MS ? entry : undefined;
  }
}

/**
 * Who a peer is, for counting: one host can speak from many addresses, so every loopback address
 * (all of 127.0.0.0/8 and ::1) is one peer, and an IPv6 peer is its /64, which one host is given whole.
 */
export function peerOf(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  const plain = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  if (/^127\./.test(plain) || plain === '::1') return 'loopback';
  if (!plain.includes(':')) return plain;
  const [head = '', tail = ''] = plain.split('::');
  const groups = head === '' ? [] : head.split(':');
  const full = plain.includes('::')
    ? [...groups, ...Array<string>(8 - groups.length - (tail === '' ? 0 : tail.split(':').length)).fill('0')]
    : plain.split(':');
  return `${full
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
