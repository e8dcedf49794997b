import { describe, expect, it } from 'vitest';
import { HttpProblem } from '../../src/contract/problems';
import { FailedAttempts, peerOf } from '../../src/core/http/failed-attempts';

/** docs/security.md (Credentials) and docs/triggers.md (Verification): wrong credentials are counted per peer, not per address. */
describe('failed attempts', () => {
  it('one host is one peer: every loopback address, an IPv6 /64', () => {
    expect(peerOf('127.0.0.1')).toBe('loopback');
    expect(peerOf('127.0.1.30')).toBe('loopback');
    expect(peerOf('::ffff:127.9.9.9')).toBe('loopback');
    expect(peerOf('::1')).toBe('loopback');
    expect(peerOf('203.0.113.7')).toBe('203.0.113.7');
    expect(peerOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(peerOf('2001:db8:0:1::5')).toBe(peerOf('2001:0db8:0000:0001:ffff:1:2:3'));
    expect(peerOf('2001:db8:0:1::5')).not.toBe(peerOf('2001:db8:0:2::5'));
    expect(peerOf(undefined)).toBe('unknown');
  });

  it('a guesser that moves to another loopback address or another address of its /64 is still refused', () => {
    const refused = (attempts: FailedAttempts, address: string) => {
      try {
        attempts.check(address);
        return false;
      } catch (error) {
        return error instanceof HttpProblem && error.code === 'too_many_attempts';
      }
    };
    const attempts = new FailedAttempts(() => 1000);
    for (let i = 1; i <= 10; i++) attempts.record(`127.0.1.${i}`);
    expect(refused(attempts, '127.0.2.1')).toBe(true);
    expect(refused(attempts, '203.0.113.7')).toBe(false);
    for (let i = 1; i <= 10; i++) attempts.record(`2001:db8:0:1::${i}`);
    expect(refused(attempts, '2001:db8:0:1:ffff::1')).toBe(true);
    expect(refused(attempts, '2001:db8:0:2::1')).toBe(false);
  });
});
