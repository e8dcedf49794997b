/**
 * @module Where a run's process runs: the seam a git worktree per run plugs into. `prepare` decides
 * the run's working directory and the spawner that starts its agent; what it answers is recorded
 * on the run (`placement`) in the same write as its process, so `release` finds it when the run
 * ends, here or in crash recovery after a restart. Today's provider: the workspace's own folder.
 */
import type { Spawner } from '../process/spawner';
import type { PlacementRecord, Workspace } from '../types';

export interface Placed extends PlacementRecord {
  spawner: Spawner;
}

export interface RunPlacement {
  /** The run's working directory and the spawner that starts its agent. */
  prepare(run: { taskId: string; workspace: Workspace }): Promise<Placed>;
  /** The run has ended (its final record is durable): undo what `prepare` made. Never throws for a run it did not place. */
  release(run: { taskId: string; workspaceId: string; placement: PlacementRecord }): Promise<void>;
}

export const inWorkspace = (spawner: Spawner): RunPlacement => ({
  prepare: async ({ workspace }) => ({ cwd: workspace.path, spawner }),
  release: async () => undefined,
});
