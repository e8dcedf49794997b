import type { DeliveryOutcome, RunRecord } from '../../contract/records';

/**
 * What the service tells its observers (the logs, the metrics): a run started here, a run ended
 * (its final record durable), a webhook attempt settled. Observers never throw into the service.
 */
export interface ServiceObserver {
  runStarted(run: RunRecord): void;
  runEnded(run: RunRecord): void;
  /** A webhook attempt: delivered (with the time since its event, where known), to be retried, or given up. */
  deliveryAttempted(outcome: 'delivered' | 'retried' | 'failed', lagMs?: number): void;
  /** A schedule's occurrence: a run started (or queued), skipped for overlap, or not started (refused). */
  scheduleFired(schedule: string, outcome: 'started' | 'skipped' | 'refused'): void;
  /** A trigger's delivery, by what became of it, or `unverified` (docs/triggers.md). */
  triggerDelivered(trigger: string, outcome: DeliveryOutcome | 'unverified'): void;
}

/** Tells every observer, each on its own: one that fails does not stop the others or the service. */
export function fanOut(observers: ServiceObserver[], onError: (error: unknown) => void): ServiceObserver {
  const each =
    <K extends keyof ServiceObserver>(key: K) =>
    (...args: Parameters<ServiceObserver[K]>) => {
      for (const observer of observers) {
        try {
          (observer[key] as (...a: Parameters<ServiceObserver[K]>) => void)(...args);
        } catch (error) {
          onError(error);
        }
      }
    };
  return {
    runStarted: each('runStarted'),
    runEnded: each('runEnded'),
    deliveryAttempted: each('deliveryAttempted'),
    scheduleFired: each('scheduleFired'),
    triggerDelivered: each('triggerDelivered'),
  };
}
