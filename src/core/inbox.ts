import { newSortableId } from './ids';
import { OrderedIndex, type Page } from './ordered-index';
import { HttpProblem } from './problem';
import type { RunTokenGrant } from './run-tokens';
import type { HeadlessStore } from './store';
import type { InboxItem } from './types';

const key = (id: string) => `inbox:${id}`;
type Bucket = 'unread' | 'read';

/** The Inbox (README: The Inbox): the durable result channel agents push their reports to. */
export class Inbox {
  private readonly index = new OrderedIndex<Bucket>();

  constructor(private readonly store: HeadlessStore) {}

  async load(): Promise<void> {
    for await (const [, item] of this.store.scan<InboxItem>('inbox:')) {
      this.index.add(item.workspaceId, item.id, item.readAt === null ? 'unread' : 'read');
    }
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
    await this.store.set(key(item.id), item);
    this.index.add(workspaceId, item.id, 'unread');
    return item;
  }

  async list(workspaceId: string, unread: boolean, limit: number, cursor?: string): Promise<{ items: InboxItem[]; nextCursor: string | null }> {
    const page: Page = this.index.page(workspaceId, unread ? 'unread' : undefined, limit, cursor);
    const items = await this.store.getMany<InboxItem>(page.ids.map(key));
    return { items: items.filter((i): i is InboxItem => i !== undefined), nextCursor: page.next };
  }

  /** Deletes up to `limit` of the items created before `bound` (a sortable id bound); returns how many. */
  async prune(bound: string, limit: number): Promise<number> {
    const old = this.index.oldest(bound, limit);
    for (const { group, id } of old) {
      const item = await this.store.get<InboxItem>(key(id));
      await this.store.delete(key(id));
      this.index.delete(group, id, item?.readAt === null ? 'unread' : 'read');
    }
    return old.length;
  }

  async markRead(workspaceId: string, itemId: string): Promise<InboxItem> {
    const item = await this.store.get<InboxItem>(key(itemId));
    if (!item || item.workspaceId !== workspaceId) {
      throw new HttpProblem('inbox_item_not_found', `No Inbox item "${itemId}" in workspace "${workspaceId}".`);
    }
    if (item.readAt !== null) return item;
    const read = { ...item, readAt: new Date().toISOString() };
    await this.store.set(key(itemId), read);
    this.index.move(workspaceId, itemId, 'unread', 'read');
    return read;
  }
}
