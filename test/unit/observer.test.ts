import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/contract/records';
import { logObserver } from '../../src/core/telemetry/log-observer';
import { createObserver } from '../../src/core/telemetry/observer';

/** The observer seam: events by name (ServiceEvents), each told to the subscribers that handle it. */

const run = { taskId: 'run_1', workspaceId: 'ws', agent: 'fake', mode: 'async', resumeId: 'ses_1', status: 'succeeded' } as RunRecord;

describe('the service observer', () => {
  it('tells an event, with its arguments, to each subscriber that handles it; the others are not asked', () => {
    const told: string[] = [];
    const observe = createObserver(
      [
        { triggerDelivered: (trigger, outcome) => void told.push(`a: ${trigger} ${outcome}`) },
        { runEnded: (r) => void told.push(`b: ${r.taskId}`), triggerDelivered: (trigger) => void told.push(`b: ${trigger}`) },
        {},
      ],
      (error) => {
        throw error;
      },
    );
    observe.emit('triggerDelivered', 'gh', 'started');
    observe.emit('runEnded', run);
    observe.emit('scheduleFired', 'nightly', 'skipped');
    expect(told).toEqual(['a: gh started', 'b: gh', 'b: run_1']);
  });

  it('a subscriber that throws is reported and does not stop the others', () => {
    const errors: unknown[] = [];
    const told: number[] = [];
    const observe = createObserver(
      [
        {
          deliveryAttempted: () => {
            throw new Error('broken');
          },
        },
        { deliveryAttempted: (_outcome, lagMs) => void told.push(lagMs ?? -1) },
      ],
      (error) => errors.push(error),
    );
    expect(() => observe.emit('deliveryAttempted', 'delivered', 120)).not.toThrow();
    expect(told).toEqual([120]);
    expect(errors).toMatchObject([{ message: 'broken' }]);
  });

  it('the logs subscribe to runs only: schedules and triggers log their own lines', () => {
    const lines: Array<[Record<string, unknown>, string]> = [];
    const logger = { info: (o: Record<string, unknown>, m: string) => void lines.push([o, m]), warn: () => undefined, error: () => undefined };
    expect(Object.keys(logObserver(logger)).sort()).toEqual(['runEnded', 'runStarted']);
    const observe = createObserver([logObserver(logger)], () => undefined);
    observe.emit('runStarted', run);
    observe.emit('triggerDelivered', 'gh', 'started');
    expect(lines).toEqual([[{ taskId: 'run_1', workspaceId: 'ws', agent: 'fake', mode: 'async', resumeId: 'ses_1' }, 'run started']]);
  });
});
