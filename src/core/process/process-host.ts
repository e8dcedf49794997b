/**
 * @module Where a run's processes live, as one face: stopping them, reaping what they left, their
 * memory, and whether a recorded one still runs. A placement names its host (runs/placement.ts),
 * and the supervisor, the memory guard, crash recovery and the launcher ask it, never /proc or
 * this machine directly: a container's or a remote machine's processes are its host's to answer
 * for. The local host (local-host.ts) is this machine's process groups and /proc.
 */
import type { SpawnedProcess } from './spawner';

/** A run's process as it is recorded (`StoredRun.process`): what crash recovery finds it by. */
export interface RecordedProcess {
  pid: number;
  /** Its start time, where the host can read one: a reused pid is never taken for it. */
  startTime?: string;
  /** Where it runs, as its host named it (`ProcessHost.machine`): its pid means something only there. */
  machine: string;
}

/** What a host is asked about: one run. Every process of it carries its id as `HEADLESS_TASK_ID`. */
export interface HostedRun {
  taskId: string;
  /** Its process, as recorded; absent when it crashed before it was. */
  process?: RecordedProcess;
  /** Its placement's own data (`PlacementRecord.data`: a worktree, a pod's name). */
  data?: unknown;
}

export interface ProcessHost {
  /** Recorded with each process it runs: where its pid means something. */
  readonly machine: string;
  /**
   * Signals a live run's processes (all of them, not only the one spawned). `spawned` is its
   * spawner's handle: the local host signals through it, so a custom spawner's `kill` holds.
   */
  kill(run: HostedRun, signal: NodeJS.Signals, spawned: SpawnedProcess): Promise<void>;
  /** Kills whatever is left of a run whose process has ended, or whose service stopped (crash recovery). Never throws for a run it does not know. */
  reap(run: HostedRun): Promise<void>;
  /** The resident memory of the run's processes, in bytes (0 where it cannot be read): what a memory ceiling compares. */
  memory(run: HostedRun): Promise<number>;
  /** Whether the run's recorded process still runs. */
  alive(run: HostedRun): Promise<boolean>;
}
