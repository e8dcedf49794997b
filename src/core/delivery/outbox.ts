import type { ApprovalRecord, WebhookDeliveryView, WebhookEvent } from '../../contract/records';
import { publicRecord } from '../public-record';
import type { Delivery, StoredRun } from '../types';
import { shownUrl } from './replies';

/**
 * The outbox of a run: its deliveries live in its own record, so the state change that owes a
 * delivery (the run ended; its Session became resumable) and the delivery itself are one write.
 * These are pure functions over the record; the dispatcher stores what they return.
 */

/** The same delivery: one target, one event, one subject (a run's question, for `permission.requested`). */
export const sameDelivery = (a: Pick<Delivery, 'target' | 'event' | 'subject'>, b: Pick<Delivery, 'target' | 'event' | 'subject'>) =>
  a.target === b.target && a.event === b.event && a.subject === b.subject;

/**
 * The run with a pending delivery for `event` to each target that asked for it (once each, or
 * once per question: `approval`, whose record is the payload).
 */
export function owe(run: StoredRun, event: WebhookEvent, at: string, approval?: ApprovalRecord): StoredRun {
  const deliveries = [...(run.deliveries ?? [])];
  const about = approval ? { subject: approval.id, approval } : {};
  for (const [target, { events }] of (run.webhookTargets ?? []).entries()) {
    if (!events.includes(event) || deliveries.some((d) => sameDelivery(d, { target, event, subject: about.subject }))) continue;
    deliveries.push({ target, event, ...about, at, state: 'pending', attempts: 0, nextAttemptAt: Date.parse(at) });
  }
  return deliveries.length === (run.deliveries ?? []).length ? run : withDeliveries(run, deliveries);
}

/** The run with its deliveries replaced, and its due time (what the dispatcher looks up) derived from them. */
export function withDeliveries(run: StoredRun, deliveries: Delivery[]): StoredRun {
  const due = deliveries.filter((d) => d.state === 'pending').map((d) => d.nextAttemptAt ?? 0);
  const { deliveryDueAt: _due, ...rest } = run;
  return { ...rest, deliveries, ...(due.length > 0 ? { deliveryDueAt: Math.min(...due) } : {}) };
}

/** The id receivers de-duplicate by: the same for every attempt. */
export const deliveryId = (taskId: string, d: Pick<Delivery, 'target' | 'event' | 'subject'>) =>
  `msg_${taskId}_${d.target}_${d.event.replace('.', '_')}${d.subject ? `_${d.subject}` : ''}`;

/** The exact body, rebuilt from the stored record: the same bytes (and signature) at every attempt. */
export function payloadOf(run: StoredRun, d: Delivery): string {
  const { taskId, resumeId, workspaceId, agent } = run;
  const data = d.event === 'run.ended' ? publicRecord(run) : (d.approval ?? { taskId, resumeId, workspaceId, agent });
  return JSON.stringify({ type: d.event, timestamp: d.at, data });
}

/** The deliveries of a run, one per target and event, as its record shows them. */
export function viewOf(run: StoredRun): WebhookDeliveryView[] {
  return (run.webhookTargets ?? []).flatMap((target, index) =>
    target.events.flatMap((event): WebhookDeliveryView[] => {
      const made = run.deliveries?.filter((x) => x.target === index && x.event === event) ?? [];
      if (made.length === 0) return [{ id: null, url: shownUrl(target), event, state: 'waiting', attempts: 0, nextAttemptAt: null }];
      return made.map((d) => ({
        id: deliveryId(run.taskId, d),
        url: shownUrl(target),
        event,
        state: d.state,
        attempts: d.attempts,
        nextAttemptAt: d.state === 'pending' && d.nextAttemptAt !== null ? new Date(d.nextAttemptAt).toISOString() : null,
        ...(d.lastStatus === undefined ? {} : { lastStatus: d.lastStatus }),
        ...(d.lastError === undefined ? {} : { lastError: d.lastError }),
        ...(d.deliveredAt === undefined ? {} : { deliveredAt: d.deliveredAt }),
      }));
    }),
  );
}
