/**
 * @module Where a run's process runs: the seam a git worktree per run plugs into
 * (worktrees/worktree-placement.ts). `prepare` decides the run's working directory and the
 * spawner that starts its agent; what it answers is recorded on the run (`placement`) with its
 * process, or on its final record when it never started. As the run ends, `settle` reads what it
 * changed (into the final record); once that record is durable, `release` undoes what `prepare`
 * made, here or in crash recovery after a restart. The default provider: the workspace's own folder.
 */
import type { RunChanges, RunPolicy } from '../../contract/records';
import type { Spawner } from '../process/spawner';
import type { PlacementRecord, Workspace } from '../types';

export interface Placed extends PlacementRecord {
  spawner: Spawner;
  /** Added to the run's environment. */
  env?: Record<string, string>;
  /** In a sandbox: what it sees. @default the workspace's folder */
  view?: SandboxView;
}

/** What a placed run sees in a sandbox. */
export interface SandboxView {
  /** The folder shown as its workspace. */
  root: string;
  /** What else it may read. */
  readable: string[];
  /** What it must not see inside them (other workspaces' folders in its worktree). */
  hidden: string[];
  /** Folders shown, read-only, in the place of another path (a per-run view of its repository's git folder). */
  replaced: Array<{ source: string; path: string }>;
}

/** A run's patch: what it changed, as `git diff` prints it, cut at a bound. */
export interface RunPatch {
  text: string;
  truncated: boolean;
}

/** What `settle` read: the change for the final record, its patch, and whether the run's place stays after `release`. */
export interface Settled {
  changes: Omit<RunChanges, 'worktree'>;
  patch: RunPatch;
  kept: boolean;
}

export interface PlaceInput {
  taskId: string;
  resumeId: string;
  workspace: Workspace;
  policy?: RunPolicy;
}

export interface ReleaseInput {
  taskId: string;
  workspaceId: string;
  placement: PlacementRecord;
  /** What `settle` read, as the final record holds it; undefined when it could not be read. */
  changes?: RunChanges;
}

export interface RunPlacement {
  /** Why a run cannot be placed as its policy asks (a worktree of a folder that is no git repository), or undefined. */
  check(run: Pick<PlaceInput, 'workspace' | 'policy'>): Promise<string | undefined>;
  /** The run's working directory and the spawner that starts its agent. */
  prepare(run: PlaceInput): Promise<Placed>;
  /** What the run changed, read before its final record is written; `kept`: its place stays after `release`. */
  settle(run: { taskId: string; placement: PlacementRecord }): Promise<Settled | undefined>;
  /** The run has ended (its final record is durable): undo what `prepare` made. Never throws for a run it did not place. */
  release(run: ReleaseInput): Promise<void>;
  /** After a restart: what runs that have ended left behind (a crash before their placement was recorded) is settled and released. */
  sweep(a: { workspaces: Workspace[]; hasEnded: (taskId: string) => Promise<boolean> }): Promise<void>;
}

export const inWorkspace = (spawner: Spawner): RunPlacement => ({
  check: async () => undefined,
  prepare: async ({ workspace }) => ({ cwd: workspace.path, spawner }),
  settle: async () => undefined,
  release: async () => undefined,
  sweep: async () => undefined,
});

/** The part of what `prepare` answered that is recorded on the run. */
export const placementRecord = (placed: Placed): PlacementRecord => ({ cwd: placed.cwd, ...(placed.worktree ? { worktree: placed.worktree } : {}) });
