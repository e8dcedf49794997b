import { describe, expect, it } from 'vitest';
import { cronOf } from '../../src/core/schedules/schedule-spec';

/**
 * When a schedule's occurrences fall, as documented (docs/queue-and-schedules.md): croner reads
 * the expression in the time zone; each occurrence is one instant, and firing keys it by that
 * instant, so two instances never fire one occurrence twice and a repeated hour's two instants are
 * two occurrences.
 */
const next = (cron: string, timezone: string, from: string, count: number) => {
  const c = cronOf({ name: 't', cron, timezone, workspace: 'ws', prompt: 'x' });
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < count; i++) {
    at = c.nextRun(at)!;
    out.push(at.toISOString());
  }
  return out;
};

describe('occurrences across daylight-saving changes (Europe/Berlin)', () => {
  it('a daily 02:30 in the skipped hour (28 March 2027) runs once, at 03:00 local, the first moment after the gap', () => {
    expect(next('30 2 * * *', 'Europe/Berlin', '2027-03-27T12:00:00Z', 3)).toEqual([
      '2027-03-28T01:00:00.000Z',
      '2027-03-29T00:30:00.000Z',
      '2027-03-30T00:30:00.000Z',
    ]);
  });

  it('a daily 02:30 in the repeated hour (31 October 2027) runs once, the first time 02:30 comes', () => {
    expect(next('30 2 * * *', 'Europe/Berlin', '2027-10-30T12:00:00Z', 2)).toEqual(['2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z']);
  });

  it('an hourly schedule runs every real hour through the repeated hour: 02:30 local twice', () => {
    expect(next('30 * * * *', 'Europe/Berlin', '2027-10-30T23:00:00Z', 4)).toEqual([
      '2027-10-30T23:30:00.000Z',
      '2027-10-31T00:30:00.000Z',
      '2027-10-31T01:30:00.000Z',
      '2027-10-31T02:30:00.000Z',
    ]);
  });

  it('UTC by default: no change at all', () => {
    expect(next('30 2 * * *', 'UTC', '2027-03-27T12:00:00Z', 2)).toEqual(['2027-03-28T02:30:00.000Z', '2027-03-29T02:30:00.000Z']);
  });
});
