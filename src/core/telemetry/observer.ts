import type { DeliveryOutcome, RunRecord } from '../../contract/records';

/**
 * What the service tells its observers (the logs, the metrics, the traces), each event with its
 * arguments. A new event is an entry here, its `emit`, and a handler in the subscribers that care.
 */
export interface ServiceEvents {
  /** A run started here. */
  runStarted: [run: RunRecord];
  /** A run ended: its final record is durable. */
  runEnded: [run: RunRecord];
  /** A webhook attempt: delivered (with the time since its event, where known), to be retried, or given up. */
  deliveryAttempted: [outcome: 'delivered' | 'retried' | 'failed', lagMs?: number];
  /** A schedule's occurrence: a run started (or queued), skipped for overlap, or not started (refused). */
  scheduleFired: [schedule: string, outcome: 'started' | 'skipped' | 'refused'];
  /** A trigger's delivery, by what became of it, or `unverified` (docs/triggers.md). */
  triggerDelivered: [trigger: string, outcome: DeliveryOutcome | 'unverified'];
}

/** An observer: a handler for each event it cares about. */
export type ServiceSubscriber = { [E in keyof ServiceEvents]?: (...args: ServiceEvents[E]) => void };

/** Where the service's units tell what happened. Observers never throw into the service. */
export interface ServiceObserver {
  emit<E extends keyof ServiceEvents>(event: E, ...args: ServiceEvents[E]): void;
}

/** Tells every subscriber of an event, each on its own: one that fails does not stop the others or the service. */
export function createObserver(subscribers: ServiceSubscriber[], onError: (error: unknown) => void): ServiceObserver {
  return {
    emit(event, ...args) {
      for (const subscriber of subscribers) {
        try {
          subscriber[event]?.(...args);
        } catch (error) {
          onError(error);
        }
      }
    },
  };
}
