import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type GuardContext, stallGuard } from '../../src/core/runs/guards';
import type { RunStop } from '../../src/core/runs/outcome';

/** A guard's view of a run, driven by the test: its lines, and whether it waits on a caller. */
function fakeRun() {
  const stops: RunStop[] = [];
  const lines: Array<(line: string) => void> = [];
  const waiting: Array<(waiting: boolean) => void> = [];
  const context: GuardContext = {
    pid: 1,
    memory: async () => 0,
    stop: (stop) => void stops.push(stop),
    onLine: (listener) => void lines.push(listener),
    onEvent: () => undefined,
    onWaiting: (listener) => void waiting.push(listener),
  };
  const line = () => {
    for (const listener of lines) listener('x');
  };
  const wait = (now: boolean) => {
    for (const listener of waiting) listener(now);
  };
  return { context, stops, line, wait };
}

describe('the stall guard (docs/approvals.md: a question is not a stall)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('stops a run that prints nothing for its time, and each line restarts it', () => {
    const run = fakeRun();
    stallGuard(1000)(run.context);
    vi.advanceTimersByTime(900);
    run.line();
    vi.advanceTimersByTime(900);
    expect(run.stops).toEqual([]);
    vi.advanceTimersByTime(200);
    expect(run.stops.map((s) => s.error?.code)).toEqual(['stalled']);
  });

  it('waits while the run waits on a caller, however long, and gives it its full time again after the answer', () => {
    const run = fakeRun();
    stallGuard(1000)(run.context);
    vi.advanceTimersByTime(900);
    run.wait(true);
    vi.advanceTimersByTime(60_000);
    run.line();
    expect(run.stops).toEqual([]);
    run.wait(false);
    vi.advanceTimersByTime(999);
    expect(run.stops).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(run.stops).toHaveLength(1);
  });

  it('once ended, an answer arriving later arms nothing', () => {
    const run = fakeRun();
    const end = stallGuard(1000)(run.context);
    run.wait(true);
    end();
    run.wait(false);
    vi.advanceTimersByTime(10_000);
    expect(run.stops).toEqual([]);
  });
});
