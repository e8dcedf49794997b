import type { Spawner } from '../process/spawner';
import type { Workspace } from '../types';

/**
 * Where a run's process runs and through what it is started: the seam a git worktree per run or
 * a sandboxed spawner plugs into, each as one provider. Today's provider: the workspace's own
 * folder and the configured spawner.
 */
export interface RunPlacement {
  /** The run's working directory and the spawner that starts its agent. */
  place(run: { taskId: string; workspace: Workspace }): Promise<{ cwd: string; spawner: Spawner }>;
}

export const inWorkspace = (spawner: Spawner): RunPlacement => ({
  place: async ({ workspace }) => ({ cwd: workspace.path, spawner }),
});
