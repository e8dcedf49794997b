/**
 * @module What the webhook dispatcher may write of the run records: two named transitions of
 * transitions.ts (`claimEnded`, `settleDelivery`), nothing else. The dispatcher lies below the
 * runs and cannot name them; the composition root hands it this.
 */
import type { OutboxRecords } from '../delivery/dispatcher';
import type { RunRecordWriter } from './record-writer';
import type { RunRecords } from './records';
import { change } from './transitions';

export function outboxRecords(records: RunRecords, writer: RunRecordWriter, instanceId: string): OutboxRecords {
  return {
    find: (taskId) => records.find(taskId),
    withDueDeliveries: () => records.withDueDeliveries(),
    claimEnded: (taskId, gone) => writer.update(taskId, change.claimEnded(gone, instanceId)),
    settleDelivery: (taskId, settled) => writer.update(taskId, change.settleDelivery(instanceId, settled)),
  };
}
