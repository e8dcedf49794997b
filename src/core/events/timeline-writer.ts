import type { RunEventData } from '../../contract/events';
import type { RunEventType } from '../../contract/records';

/**
 * What a unit may add to a run's timeline beside the run's own events (a trigger's resolution,
 * say): an event, while the run runs on this instance and its timeline is open. `RunEvents` is it.
 */
export interface TimelineWriter {
  /** Adds an event; answers whether it was added (not to an ended run, nor one running elsewhere). */
  append<T extends RunEventType>(taskId: string, type: T, data: RunEventData[T]): boolean;
}
