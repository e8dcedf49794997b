import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

let lastTime = 0;
let counter = 0;

/**
 * A unique id that sorts in creation order as a plain string: base36 time (fixed width), a
 * per-millisecond counter, then randomness. List cursors are these ids, so a page is a binary
 * search, whatever the number of stored records.
 */
export function newSortableId(prefix: string): string {
  const now = Math.max(Date.now(), lastTime);
  counter = now === lastTime ? counter + 1 : 0;
  lastTime = now;
  const time = now.toString(36).padStart(9, '0');
  const seq = counter.toString(36).padStart(4, '0');
  return `${prefix}${time}${seq}${randomBytes(8).toString('hex')}`;
}

/** Sorts after every id `newSortableId(prefix)` made before `time`, and before every later one. */
export function sortableIdBound(prefix: string, time: number): string {
  return `${prefix}${Math.max(0, time).toString(36).padStart(9, '0')}`;
}

/** A fresh unguessable secret (256 bits). */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function sha256(value: string): string {
  return hash('sha256', value, 'hex');
}

/**
 * A constant-time check against `expected` that does not leak its length: both sides are hashed
 * (the expected one once), then compared.
 */
export function secretMatcher(expected: string): (presented: string) => boolean {
  const digest = hash('sha256', expected, 'buffer');
  return (presented) => timingSafeEqual(hash('sha256', presented, 'buffer'), digest);
}
