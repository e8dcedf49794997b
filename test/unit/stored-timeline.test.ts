import Keyv from 'keyv';
import { expect, it } from 'vitest';
import type { RunRecord } from '../../src/contract/records';
import { RunEvents } from '../../src/core/events/run-events';
import { Timeline } from '../../src/core/events/timeline';
import { saveTimeline } from '../../src/core/events/timeline-store';
import { keyvStore } from '../../src/core/store/keyv-store';
import { storedRun } from '../helpers/records';

// The fleet fault it came from: an instance read a run of another one while it ran, then its
// interrupted record, within the stored timeline's cache, and answered the timeline without its end.
it('a stored timeline read while its run ran, then with its ended record a moment later, ends with that record', async () => {
  const store = keyvStore(new Keyv());
  const limits = { maxEvents: 1000, maxBytes: 1_000_000 };
  const stored = new Timeline([], false, limits);
  stored.append('run.started', { taskId: 'run_a', resumeId: 'ses_a', workspaceId: 'ws', agent: 'fake', mode: 'async' } as never);
  await saveTimeline(store, 'run_a', stored);
  const events = new RunEvents({ store, log: () => undefined });
  const running = storedRun('run_a') as RunRecord;
  expect((await events.page(running, 0, 100)).events.map((e) => e.type)).toEqual(['run.started']);
  const interrupted = { ...running, status: 'interrupted', endedAt: new Date().toISOString() } as RunRecord;
  const page = await events.page(interrupted, 0, 100);
  expect(page.events.map((e) => e.type)).toEqual(['run.started', 'run.ended']);
  expect(page.events.at(-1)?.data).toMatchObject({ status: 'interrupted' });
});
