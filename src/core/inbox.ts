import { newSortableId } from './util/ids';

import { Refusal } from '../contract/problems';
import type { RunTokenGrant } from './runs/tokens';
import type { HeadlessStore, RecordTable } from './store/headless-store';
import type { InboxItem } from '../contract/records';

/** The Inbox (docs/http-api.md: The Inbox): the durable result channel agents push their reports to. */
export class Inbox {
  private readonly items: RecordTable<InboxItem>;

  constructor(store: HeadlessStore) {
    this.items = store.table<InboxItem>({ name: 'inbox', group: 'workspaceId', bucket: { field: 'readAt', set: 'read', unset: 'unread' } });
  }

  load(): Promise<void> {
    return this.items.load();
  }

  /** Attribution comes only from the run token, never from the body. */
  async push(workspaceId: string, input: { title: string; body: string }, grant?: RunTokenGrant): Promise<InboxItem> {
    const item: InboxItem = {
      id: newSortableId('inb_'),
      workspaceId,
      taskId: grant?.taskId ?? null,
      resumeId: grant?.resumeId ?? null,
      title: input.title,
      body: input.body,
      createdAt: new Date().toISOString(),
      readAt: null,
    };
    await this.items.put(item.id, item);
    return item;
  }

  async list(workspaceId: string, unread: boolean, limit: number, cursor?: string): Promise<{ items: InboxItem[]; nextCursor: string | null }> {
    const page = await this.items.page(workspaceId, unread ? 'unread' : undefined, limit, cursor);
    const items = await this.items.getMany(page.ids);
    return { items: items.filter((i): i is InboxItem => i !== undefined && (!unread || i.readAt === null)), nextCursor: page.next };
  }

  /** Deletes up to `limit` of the items created before `bound` (a sortable id bound); returns how many. */
  async prune(bound: string, limit: number): Promise<number> {
    const old = await this.items.oldest(bound, limit);
    for (const id of old) await this.items.delete(id);
    return old.length;
  }

  async get(workspaceId: string, itemId: string): Promise<InboxItem> {
    const item = await this.items.get(itemId);
    if (!item || item.workspaceId !== workspaceId) {
      throw new Refusal('inbox_item_not_found', `No Inbox item "${itemId}" in workspace "${workspaceId}".`);
    }
    return item;
  }

  async markRead(workspaceId: string, itemId: string): Promise<InboxItem> {
    const item = await this.get(workspaceId, itemId);
    if (item.readAt !== null) return item;
    const read = { ...item, readAt: new Date().toISOString() };
    await this.items.put(itemId, read);
    return read;
  }
}
