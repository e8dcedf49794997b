import { describe, expect, it } from 'vitest';
import { TailBuffer } from '../../src/core/process/collectors';

describe('the output tail', () => {
  it.each([1, 2, 3])('never begins inside a character, whatever byte the cut falls on (offset %i of a 4-byte one)', (offset) => {
    // 4-byte characters, and a limit that makes the cut fall `offset` bytes into one.
    const max = 64 * 1024 - offset;
    const tail = new TailBuffer(max);
    for (let i = 0; i < 20; i++) tail.push(Buffer.from('😀'.repeat(1000)));
    const text = tail.text();
    expect(text.startsWith('\uFFFD')).toBe(false);
    expect(text.startsWith('😀')).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(max);
    expect(tail.truncated).toBe(true);
  });

  it('keeps everything, and no more, when nothing was cut; binary stays JSON-safe', () => {
    const tail = new TailBuffer(16);
    tail.push(Buffer.from('héllo'));
    expect(tail.text()).toBe('héllo');
    const binary = new TailBuffer(8);
    binary.push(Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80]));
    expect(JSON.parse(JSON.stringify(binary.text()))).toBe(binary.text());
  });
});
