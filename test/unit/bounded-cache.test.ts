import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../src/core/util/bounded-cache';

describe('BoundedCache', () => {
  it('drops the least recently written entry once full; a rewrite makes an entry newest', () => {
    const cache = new BoundedCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 10);
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(10);
    expect(cache.get('c')).toBe(3);
    expect(cache.size).toBe(2);
    cache.delete('a');
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(1);
  });

  it('a read does not make an entry newer', () => {
    const cache = new BoundedCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.get('a');
    cache.set('c', 3);
    expect(cache.get('a')).toBeUndefined();
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses size %s', (size) => {
    expect(() => new BoundedCache(size)).toThrow(RangeError);
  });
});
