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

/** SHA-256 in hex (what is held and compared in a secret's place): Node makes hex about three times as fast as a `Buffer`. */
export function sha256(value: string): string {
  return hash('sha256', value, 'hex');
}

/**
 * A constant-time check of a presented secret's digest (`sha256`) against `expected`: comparing
 * digests does not leak the expected secret's length.
 */
export function secretMatcher(expected: string): (presented: string) => boolean {
  const digest = Buffer.from(sha256(expected), 'hex');
  return (presented) => timingSafeEqual(Buffer.from(presented, 'hex'), digest);
}
