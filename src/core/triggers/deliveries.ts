import type { CollectionSpec, HeadlessStore, RecordTable } from '../store/headless-store';
import { newSortableId } from '../util/ids';

import type { DeliveryOutcome } from '../../contract/records';

export type { DeliveryOutcome };

/** One delivery to a trigger, as `GET /api/triggers/:name/deliveries` shows it. No header, body or secret is kept. */
export interface DeliveryRecord {
  id: string;
  trigger: string;
  receivedAt: string;
  outcome: DeliveryOutcome;
  /** Why it was filtered, refused or deduplicated, or what its resolution did. */
  reason?: string;
  event?: string;
  status?: 'firing' | 'resolved';
  /** The sender's own id of the delivery. */
  deliveryId?: string;
  /** The run it started, or the run it repeats or resolves. */
  taskId?: string;
}

const DELIVERY_TABLE: CollectionSpec<DeliveryRecord> = { name: 'trigger_deliveries', group: 'trigger', bucket: { field: 'outcome' } };

/** The deliveries of every trigger, newest first per trigger, pruned by retention with the runs. */
export class DeliveryLog {
  private readonly table: RecordTable<DeliveryRecord>;

  constructor(store: HeadlessStore) {
    this.table = store.table(DELIVERY_TABLE);
  }

  load(): Promise<void> {
    return this.table.load();
  }

  newId(): string {
    return newSortableId('dlv_');
  }

  async has(id: string): Promise<boolean> {
    return (await this.table.get(id)) !== undefined;
  }

  async add(record: DeliveryRecord): Promise<void> {
    await this.table.put(record.id, record);
  }

  async list(trigger: string, limit: number, cursor?: string): Promise<{ deliveries: DeliveryRecord[]; nextCursor: string | null }> {
    const page = await this.table.page(trigger, undefined, limit, cursor);
    const deliveries = (await this.table.getMany(page.ids)).filter((d): d is DeliveryRecord => d !== undefined);
    return { deliveries, nextCursor: page.next };
  }

  /** Deletes up to `limit` of those received before `bound` (a sortable id bound); returns how many. */
  async prune(bound: string, limit: number): Promise<number> {
    const ids = await this.table.oldest(bound, limit);
    for (const id of ids) await this.table.delete(id);
    return ids.length;
  }
}
