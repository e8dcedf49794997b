import { newSortableId } from './util/ids';
import { type IndexEntry, type SortedIndex, createSortedIndex } from './store/sorted-index';
import { HttpProblem } from '../contract/problems';
import type { RunTokenGrant } from './runs/tokens';
import type { HeadlessStore } from './store/keyv-store';
import type { InboxItem } from '../contract/records';

const key = (id: string) => `inbox:${id}`;
type Bucket = 'unread' | 'read';
const indexEntry = (item: InboxItem): IndexEntry<Bucket> => ({ group: item.workspaceId, id: item.id, bucket: item.readAt === null ? 'unread' : 'read' });

/** The Inbox (README: The Inbox): the durable result channel agents push their reports to. */
export class Inbox {
  private readonly index: SortedIndex<Bucket>;

  constructor(private readonly store: HeadlessStore) {
    this.index = createSortedIndex(store, { table: 'headless_inbox', prefix: 'inbox:', entry: indexEntry });
  }

  load(): Promise<void> {
    return this.index.load();
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
    await this.index.add(indexEntry(item));
    return item;
  }

  async list(workspaceId: string, unread: boolean, limit: number, cursor?: string): Promise<{ items: InboxItem[]; nextCursor: string | null }> {
    const page = await this.index.page(workspaceId, unread ? 'unread' : undefined, limit, cursor);
    const items = await this.store.getMany<InboxItem>(page.ids.map(key));
    return { items: items.filter((i): i is InboxItem => i !== undefined), nextCursor: page.next };
  }

  /** Deletes up to `limit` of the items created before `bound` (a sortable id bound); returns how many. */
  async prune(bound: string, limit: number): Promise<number> {
    const old = await this.index.oldest(bound, limit);
    for (const entry of old) {
      await this.store.delete(key(entry.id));
      await this.index.delete(entry);
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
    await this.index.move(indexEntry(read), 'unread');
    return read;
  }
}
