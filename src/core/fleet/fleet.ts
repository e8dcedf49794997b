import type { ProblemCode } from '../../contract/problems';
import type { FleetQueue } from './fleet-queue';

/**
 * The instances sharing one store (docs/deployment.md: Running several instances). Each has an id, the
 * owner recorded on its runs and webhook deliveries. What must hold across instances is decided
 * here: who is alive, who holds a claim (a busy Session, an idempotency key in flight), who
 * takes over a dead instance's runs, and how one instance asks another to cancel a run.
 * Alone (SQLite, memory) all of it is in memory; on PostgreSQL it is done there, natively.
 */
export interface Fleet {
  /** This instance; new at every start. */
  readonly instanceId: string;
  /** Whether other instances may share the store: then nothing read from it may be cached. */
  readonly shared: boolean;
  /**
   * Joins the fleet and calls `takeOver` now and whenever instances have died, one sweeper at a
   * time. `isGone` must be asked only after the candidates were read: an owner that joined
   * before they were read is then known.
   */
  join(handlers: FleetHandlers): Promise<void>;
  /** Takes `key` for `holder`; answers the holder that has it already, if one does. */
  claim(key: string, holder: string): Promise<string | undefined>;
  release(key: string, holder: string): Promise<void>;
  holder(key: string): Promise<string | undefined>;
  /**
   * Runs `work` while no other instance runs work under the same `key`. `nests`: `work` may take
   * exclusive sections itself (so its lock is held apart from theirs, and never waits for them).
   */
  exclusive<T>(key: string, work: () => Promise<T>, o?: { nests?: boolean }): Promise<T>;
  /** Asks the instance that owns a run to act on it. */
  ask(instanceId: string, request: FleetRequest): Promise<FleetAnswer>;
  /** Where queued runs wait to be placed on a member that runs their workspace; alone: none (the store's queue is this instance's). */
  readonly queue?: FleetQueue;
  /** Tells the fleet which workspaces this instance runs, with what a start needs of each (never a path, an env or a secret). */
  advertise(workspaces: AdvertisedWorkspace[]): Promise<void>;
  /** A workspace some living member runs, as it advertised it; undefined when none does. */
  advertised(id: string): Promise<AdvertisedWorkspace | undefined>;
  /** Whether this instance hears every change of a run record now (alone: always; in a fleet, while it listens). */
  hearsChanges(): boolean;
  /** Whether this instance holds its lease now (alone: always). */
  leaseHeld(): boolean;
  /** Leaves: stops the lease, so the others need not wait for it to run out. */
  leave(): Promise<void>;
}

export interface FleetHandlers {
  /** Ends what gone instances left: their running runs, their pending webhook deliveries. */
  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void>;
  /** Answers another instance's request. */
  answer(request: FleetRequest): Promise<FleetAnswer>;
  /** This instance's lease ran out (it was paused, or cut off from the database): the others have taken its runs. */
  lost(): void;
  /** Its way of hearing requests was cut and is back: those sent meanwhile were lost, so what it waits for is read again. */
  reconnected(): void;
  /** A run's record was changed, by any instance (store/migrations.ts: version 2). */
  changed(taskId: string, workspaceId: string): void;
}

/** Cancel a run; a question of a run was answered (docs/approvals.md). */
/** A follow-up's text waits in the store under `message:<id>` (a notification holds 8000 bytes at most). */
export type FleetRequest = { op: 'cancel'; taskId: string } | { op: 'message'; taskId: string; id: string } | { op: 'approval'; id: string };

/** What a member tells the others of a workspace it runs, as JSON: what accepting a start for it takes (workspaces.ts says what), nothing of the machine. */
export interface AdvertisedWorkspace {
  id: string;
  [field: string]: unknown;
}

export type FleetAnswer = { ok: true } | { ok: false; code: ProblemCode; message: string };

export interface FleetOptions {
  /** How long an instance's lease lasts without renewal. @default 15000 */
  leaseMs?: number;
  log: (message: string, error?: unknown) => void;
}
