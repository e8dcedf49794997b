import type { RunRecord } from '../../contract/records';
import type { StartRequest } from '../../contract/requests';
import type { RunOrigin, StoredRun, Workspace } from '../types';
import type { StartedRun } from './live-run';

/**
 * What every ingress (the API, schedules, triggers) hands the run lifecycle: a start's own fields
 * and its layer of the run spec, and where it came from (with its schedule's or trigger's layer).
 * The spec is resolved once, by the starter, when the run is accepted (runs/run-spec.ts).
 */
export interface StartInput {
  workspace: Workspace;
  /** The prompt, Session, mode and webhook, and the start's own fields of the run spec. */
  request: StartRequest;
  /** `HEADLESS_API_URL` for the run. */
  apiUrl: string;
  /** The id an idempotent start planned for it. */
  taskId?: string;
  /** @default { source: { kind: 'api' } } */
  origin?: RunOrigin;
}

/** The run lifecycle as its ingresses see it (runs/run-service.ts implements it). */
export interface RunStarter {
  /** Starts a run, or queues it; refuses (a `Refusal`) what cannot be accepted. */
  start(input: StartInput): Promise<StartedRun>;
  find(taskId: string): Promise<StoredRun | undefined>;
  cancel(taskId: string): Promise<RunRecord>;
}
