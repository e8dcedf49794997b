import type { RunRecord } from '../contract/records';
import type { StoredRun } from './types';

/** The public record: the stored one without what only recovery and the outbox need. */
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
    ...record
  } = stored;
  return record;
}
