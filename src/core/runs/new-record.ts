import type { RunEventData } from '../../contract/events';
import type { AgentRule, RunSecret, RunSource } from '../../contract/records';
import type { RunSpec } from '../../contract/run-spec';
import { sourceOf } from '../public-record';
import type { QueuedStart, StoredRun, WebhookTarget } from '../types';
import { type ResolvedSpec, budgetOf, policyOf } from './run-spec';

/** What a run's `run.started` event says: who runs where, and its label, if it has one. */
export function startedEvent(a: {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  wait: boolean;
  spec: Pick<RunSpec, 'title' | 'metadata'>;
  source: RunSource;
}): RunEventData['run.started'] {
  const { title, metadata } = a.spec;
  const schedule = a.source.kind === 'schedule' ? a.source.name : undefined;
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    mode: a.wait ? 'sync' : 'async',
    ...(schedule === undefined ? {} : { schedule }),
    ...(title === undefined ? {} : { title }),
    ...(metadata === undefined || Object.keys(metadata).length === 0 ? {} : { metadata }),
  };
}

/**
 * The `running` record of an admitted run (or the `queued` one of a queued run), as it is first
 * stored: its resolved spec (the agent admission chose written into it), and the fields the
 * record has shown since before the spec, derived from it.
 */
export function newRunRecord(a: {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
  /** Which rule chose its agent. */
  chosenBy?: AgentRule;
  wait: boolean;
  spec: ResolvedSpec;
  /** The instance that runs it. */
  owner: string;
  webhookTargets: WebhookTarget[];
  now: string;
  /** Queued: what starting it later needs. */
  queued?: QueuedStart;
  /** Where it came from. */
  source: RunSource;
  /** The secrets it is given, by name. */
  secrets?: RunSecret[];
}): StoredRun {
  const { spec } = a;
  const policy = policyOf(spec);
  const budget = budgetOf(spec);
  return {
    taskId: a.taskId,
    resumeId: a.resumeId,
    workspaceId: a.workspaceId,
    agent: a.agent,
    ...(a.chosenBy ? { agentChosenBy: a.chosenBy } : {}),
    ...(a.secrets?.length ? { secrets: a.secrets } : {}),
    mode: a.wait ? 'sync' : 'async',
    status: a.queued ? 'queued' : 'running',
    createdAt: a.now,
    endedAt: null,
    durationMs: null,
    timeoutMs: spec.timeoutMs,
    exitCode: null,
    signal: null,
    bootId: a.owner,
    source: a.source,
    spec: { ...spec, agent: a.agent },
    ...(policy === undefined ? {} : { policy }),
    ...(budget === undefined ? {} : { budget }),
    ...(spec.title === undefined ? {} : { title: spec.title }),
    ...(spec.metadata === undefined || Object.keys(spec.metadata).length === 0 ? {} : { metadata: spec.metadata }),
    ...(a.webhookTargets.length > 0 ? { webhookTargets: a.webhookTargets } : {}),
    ...(a.queued ? { queued: a.queued } : {}),
  };
}

/** The JSON Schema a run's answer must match: its spec's (or, on a record stored before the spec, its own field). */
export function outputSchemaOf(run: Pick<StoredRun, 'spec' | 'outputSchema'>): Record<string, unknown> | undefined {
  return run.spec?.outputSchema ?? run.outputSchema;
}

/** The `run.started` event of a stored record (a queued run's, as it starts). */
export function startedEventOf(run: StoredRun): RunEventData['run.started'] {
  return startedEvent({ ...run, source: sourceOf(run), wait: run.mode === 'sync', spec: run });
}

/** The `run.queued` event of a queued record. */
export function queuedEventOf(run: StoredRun & { queued: QueuedStart }): RunEventData['run.queued'] {
  return { ...startedEventOf(run), expiresAt: run.queued.expiresAt };
}
