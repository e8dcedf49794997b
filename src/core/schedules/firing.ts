import { Refusal } from '../../contract/problems';
import { hasEnded } from '../../contract/records';
import type { IdempotencyKeys } from '../idempotency';
import type { HeadlessLogger } from '../logger';
import { type KeptStart, keptOf, keptStart } from '../runs/kept-start';
import type { RunStarter } from '../runs/run-starter';
import type { HeadlessStore } from '../store/keyv-store';
import type { RunOrigin, Workspace } from '../types';
import type { ScheduleDefinition } from './schedule-spec';

/** What a schedule last did, shared by every instance: `schedule:<name>`. */
export interface ScheduleState {
  /** The last occurrence handled (fired, or skipped for overlap), ISO. */
  lastOccurrence?: string;
  /** The run it last started. */
  lastTaskId?: string;
}

const stateKey = (name: string) => `schedule:${name}`;

export interface FiringDeps {
  store: HeadlessStore;
  idempotency: IdempotencyKeys;
  runs: Pick<RunStarter, 'start' | 'find'>;
  workspace(id: string): Promise<Workspace>;
  apiUrl(): string;
  logger: HeadlessLogger;
}

/** Why an occurrence was not fired: another instance (or an earlier boot) handled it. */
export const HANDLED_ALREADY = 'handled already';

/** What firing an occurrence came to. */
export type Fired = { started: string; replayed: boolean } | { skipped: string };

/**
 * Fires schedules' occurrences. Each occurrence is an idempotent start keyed by the schedule and
 * the occurrence's time, scoped to its workspace (idempotency.ts): every instance of a fleet
 * fires it, and exactly one run is made, also when instances start and stop around it or one
 * dies midway (its key is bound to its run before the run starts).
 */
export class Firing {
  constructor(private readonly $: FiringDeps) {}

  state(name: string): Promise<ScheduleState | undefined> {
    return this.$.store.get<ScheduleState>(stateKey(name));
  }

  /** Fires `occurrence` (ISO) of `s`; `manual`: "run now", which ignores the overlap policy. */
  async fire(s: ScheduleDefinition, occurrence: string, manual = false): Promise<Fired> {
    const state = await this.state(s.name);
    // Handled already, by another instance of a fleet (or before a restart).
    if (!manual && state?.lastOccurrence !== undefined && state.lastOccurrence >= occurrence) return { skipped: HANDLED_ALREADY };
    const previous = state?.lastTaskId === undefined ? undefined : await this.$.runs.find(state.lastTaskId);
    const busy = previous !== undefined && !hasEnded(previous.status);
    const overlap = manual ? 'allow' : (s.overlap ?? 'skip');
    if (busy && overlap === 'skip') {
      await this.remember(s.name, { ...state, lastOccurrence: occurrence });
      this.$.logger.info({ schedule: s.name, occurrence, running: previous.taskId }, 'schedule occurrence skipped: its last run has not ended');
      return { skipped: `its last run ${previous.taskId} has not ended` };
    }
    const origin: RunOrigin = {
      source: { kind: 'schedule', name: s.name, scheduledFor: occurrence },
      ...(s.run === undefined ? {} : { run: s.run }),
      ...(s.limits === undefined ? {} : { limits: s.limits }),
      ...(busy && overlap === 'queue' ? { after: previous.taskId } : {}),
    };
    const workspace = await this.$.workspace(s.workspace);
    const execute = async (taskId: string): Promise<KeptStart> => {
      const request = { prompt: s.prompt, wait: false };
      return keptOf((await this.$.runs.start({ workspace, request, apiUrl: this.$.apiUrl(), taskId, origin })).record);
    };
    const key = `schedule:${s.name}:${manual ? `now:${occurrence}` : occurrence}`;
    const once = keptStart(execute, this.$.runs);
    const {
      answer: { taskId },
      replayed,
    } = await this.$.idempotency.once(s.workspace, key, { prompt: s.prompt, origin }, once);
    if (!replayed) {
      this.$.logger.info({ schedule: s.name, occurrence, taskId, manual }, 'schedule fired');
      // The run is made: a refused state write costs only the overlap check of the next occurrence
      // (a missed-run check that fires this occurrence again is answered by its key, not run twice).
      await this.remember(s.name, { lastOccurrence: manual ? state?.lastOccurrence : occurrence, lastTaskId: taskId }).catch((error: unknown) =>
        this.$.logger.warn({ schedule: s.name, occurrence, error: String(error) }, 'could not store what the schedule did'),
      );
    }
    return { started: taskId, replayed };
  }

  /** Only ever moves forward: an instance behind the others never writes an older occurrence over a newer one. */
  private async remember(name: string, next: ScheduleState): Promise<void> {
    const current = await this.state(name);
    if (current?.lastOccurrence && next.lastOccurrence && next.lastOccurrence < current.lastOccurrence) return;
    await this.$.store.set(stateKey(name), { ...current, ...next });
  }
}

/** A firing another instance is making (or made with another overlap decision): not this one's to make. */
export const firedElsewhere = (error: unknown) =>
  error instanceof Refusal && (error.code === 'idempotency_key_in_use' || error.code === 'idempotency_key_reused');
