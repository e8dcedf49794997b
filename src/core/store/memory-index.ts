/**
 * In-memory index of ids per group (a workspace), each id in one bucket (a status, read/unread).
 * Ids sort in creation order (see `newSortableId`), so a page is a binary search plus `limit`
 * steps: its cost does not grow with the number of stored records. Built once at start-up.
 */

function lowerBound(ids: string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ids[mid] ?? '') < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insert(ids: string[], id: string): void {
  // Ids are mostly created in order, so the common case is an append.
  const last = ids.at(-1);
  if (last === undefined || last < id) ids.push(id);
  else {
    const at = lowerBound(ids, id);
    if (ids[at] !== id) ids.splice(at, 0, id);
  }
}

function remove(ids: string[], id: string): void {
  const at = lowerBound(ids, id);
  if (ids[at] === id) ids.splice(at, 1);
}

interface Group<B extends string> {
  all: string[];
  buckets: Map<B, string[]>;
}

export interface Page {
  ids: string[];
  /** The id to pass back as cursor, or null on the last page. */
  next: string | null;
}

export class OrderedIndex<B extends string> {
  private readonly groups = new Map<string, Group<B>>();

  private group(name: string): Group<B> {
    let group = this.groups.get(name);
    if (!group) {
      group = { all: [], buckets: new Map() };
      this.groups.set(name, group);
    }
    return group;
  }

  private bucket(group: Group<B>, bucket: B): string[] {
    let ids = group.buckets.get(bucket);
    if (!ids) {
      ids = [];
      group.buckets.set(bucket, ids);
    }
    return ids;
  }

  add(groupName: string, id: string, bucket: B): void {
    const group = this.group(groupName);
    insert(group.all, id);
    insert(this.bucket(group, bucket), id);
  }

  move(groupName: string, id: string, from: B, to: B): void {
    if (from === to) return;
    const group = this.group(groupName);
    remove(this.bucket(group, from), id);
    insert(this.bucket(group, to), id);
  }

  delete(groupName: string, id: string, bucket: B): void {
    const group = this.groups.get(groupName);
    if (!group) return;
    remove(group.all, id);
    remove(this.bucket(group, bucket), id);
  }

  /** Up to `limit` ids that sort before `bound` (the oldest), across every group, with their bucket. */
  oldest(bound: string, limit: number): Array<{ group: string; id: string; bucket: B }> {
    const found: Array<{ group: string; id: string; bucket: B }> = [];
    for (const [name, group] of this.groups) {
      for (const id of group.all) {
        if (id >= bound || found.length >= limit) break;
        const bucket = [...group.buckets].find(([, ids]) => ids[lowerBound(ids, id)] === id)?.[0];
        if (bucket !== undefined) found.push({ group: name, id, bucket });
      }
    }
    return found;
  }

  /** Every id in `bucket`, across every group. */
  inBucket(bucket: B): Array<{ group: string; id: string; bucket: B }> {
    return [...this.groups.entries()].flatMap(([group, g]) => (g.buckets.get(bucket) ?? []).map((id) => ({ group, id, bucket })));
  }

  /** Newest first, ids strictly older than `cursor`. */
  page(groupName: string, bucket: B | undefined, limit: number, cursor?: string): Page {
    const group = this.groups.get(groupName);
    if (!group) return { ids: [], next: null };
    const ids = bucket === undefined ? group.all : (group.buckets.get(bucket) ?? []);
    const end = cursor === undefined ? ids.length : lowerBound(ids, cursor);
    const start = Math.max(0, end - limit);
    const page = ids.slice(start, end).reverse();
    return { ids: page, next: start > 0 ? (page.at(-1) ?? null) : null };
  }
}
