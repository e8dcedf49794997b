import { LINEAR_REPLY_MARK } from '../delivery/replies';
import type { DeliveryFacts, Sender } from './sender';

/**
 * Linear (docs/triggers.md: Linear): `type`.`action` (`Issue.create`, `Issue.update`,
 * `Comment.create`), with what an update changed read out for filters: the fields it changed
 * (`updatedFrom`'s keys), the labels it added, whom it assigned the issue to.
 */

type Json = Record<string, unknown>;
const obj = (value: unknown): Json => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});
const text = (value: unknown): string => (typeof value === 'string' ? value : typeof value === 'number' ? String(value) : '');
const list = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

/** What the delivery changed: on a create, everything it has; on an update, what `updatedFrom` says was different. */
function changes(payload: Json, data: Json) {
  const created = payload.action === 'create';
  const before = obj(payload.updatedFrom);
  const changed = Object.keys(before);
  const earlierLabels = new Set(list(before.labelIds).map(text));
  const labels = list(data.labels).map(obj);
  const labelsAdded = created || 'labelIds' in before ? labels.filter((l) => !earlierLabels.has(text(l.id))).map((l) => text(l.name)) : [];
  const assigned = (created || 'assigneeId' in before) && data.assignee !== undefined && data.assignee !== null;
  return { changed, labelsAdded, assignedTo: assigned ? obj(data.assignee) : {} };
}

function readLinear(payload: Json, headers: Headers): DeliveryFacts {
  const type = text(payload.type);
  const data = obj(payload.data);
  const issueId = type === 'Issue' ? text(data.id) : text(data.issueId) || text(obj(data.issue).id);
  const id = headers.get('linear-delivery') ?? undefined;
  const ownReply = type === 'Comment' && text(data.body).startsWith(LINEAR_REPLY_MARK);
  return {
    event: [type, text(payload.action)].filter((part) => part !== '').join('.'),
    deliveryId: id,
    dedupeKey: id,
    fields: {
      ...changes(payload, data),
      issueId,
      identifier: text(data.identifier) || text(obj(data.issue).identifier),
      url: text(payload.url) || text(data.url),
      actor: text(obj(payload.actor).name),
    },
    ...(ownReply ? { skip: "a reply's own comment never starts a run" } : {}),
    ...(issueId ? { replyTo: { address: { to: 'linear-issue' as const, issueId } } } : {}),
  };
}

export const LINEAR: Sender = {
  verify: { method: 'linear' },
  // `Linear-Delivery` is a header its signature does not cover.
  unsignedId: true,
  example: {
    action: 'update',
    type: 'Issue',
    actor: { id: '9f3c7c4e-0a56-4b1e-9d8e-2f6b3c1a7e10', type: 'user', name: 'Jane Doe' },
    createdAt: '2026-11-25T10:00:00.000Z',
    organizationId: 'a1b2c3d4-0000-4000-8000-000000000001',
    webhookId: 'b2c3d4e5-0000-4000-8000-000000000002',
    webhookTimestamp: 1795600800000,
    url: 'https://linear.app/acme/issue/ENG-123/login-fails',
    data: {
      id: '2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9',
      identifier: 'ENG-123',
      number: 123,
      title: 'Login fails',
      description: 'Steps…',
      priority: 2,
      url: 'https://linear.app/acme/issue/ENG-123/login-fails',
      teamId: 'c3d4e5f6-0000-4000-8000-000000000003',
      team: { id: 'c3d4e5f6-0000-4000-8000-000000000003', key: 'ENG', name: 'Engineering' },
      state: { id: 'd4e5f6a7-0000-4000-8000-000000000004', name: 'Todo', type: 'unstarted' },
      assigneeId: 'e5f6a7b8-0000-4000-8000-000000000005',
      assignee: { id: 'e5f6a7b8-0000-4000-8000-000000000005', name: 'Agent' },
      labelIds: ['f6a7b8c9-0000-4000-8000-000000000006'],
      labels: [{ id: 'f6a7b8c9-0000-4000-8000-000000000006', name: 'agent', color: '#5e6ad2' }],
    },
    updatedFrom: { assigneeId: null, updatedAt: '2026-11-25T09:59:00.000Z' },
  },
  read: readLinear,
};
