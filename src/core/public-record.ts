import type { RunRecord, RunSource } from '../contract/records';
import type { StoredRun } from './types';

/** Where a stored run came from; records stored before `source` existed name only their schedule. */
export function sourceOf(stored: Pick<StoredRun, 'source' | 'schedule' | 'scheduledFor'>): RunSource {
  if (stored.source !== undefined) return stored.source;
  return stored.schedule === undefined ? { kind: 'api' } : { kind: 'schedule', name: stored.schedule, scheduledFor: stored.scheduledFor ?? '' };
}

/** The public record: the stored one without what only recovery and the outbox need, its schedule named from its source. */
export function publicRecord(stored: StoredRun): RunRecord {
  const {
    process: _process,
    bootId: _bootId,
    webhookTargets: _targets,
    deliveries: _deliveries,
    deliveryDueAt: _due,
    agentSessionId: _agentSession,
    queued: _queued,
    placement: _placement,
    outputSchema: _outputSchema,
    source: _source,
    schedule: _schedule,
    scheduledFor: _scheduledFor,
    ...record
  } = stored;
  const source = sourceOf(stored);
  return { ...record, source, ...(source.kind === 'schedule' ? { schedule: source.name, scheduledFor: source.scheduledFor } : {}) };
}
