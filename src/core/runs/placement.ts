/**
 * @module Where a run's process runs: the seam placement providers plug into, a public extension
 * point (the handler's `placements` option; a git worktree per run is the built-in one,
 * worktrees/worktree-placement.ts). A run's `isolation` names its provider. `prepare` decides the
 * run's working directory, the spawner that starts its agent and the host its processes live on
 * (process/process-host.ts); what it answers is recorded on the run (`placement`: its provider,
 * folder and the provider's own data) with its process, or on its final record when it never
 * started. As the run ends, `settle` reads what it changed (into the final record); once that
 * record is durable, `release` undoes what `prepare` made, here or in crash recovery after a
 * restart. The last provider, `none`: the workspace's own folder, on this machine.
 */
import type { RunChanges, RunPolicy } from '../../contract/records';
import { localHost } from '../process/local-host';
import type { ProcessHost } from '../process/process-host';
import type { Spawner } from '../process/spawner';
import type { PlacementRecord, Workspace } from '../types';

/** The provider of runs in their workspace's own folder: the default, and the last of the chain. */
export const IN_WORKSPACE = 'none';

export interface Placed {
  /** The run's working directory. */
  cwd: string;
  /** What the provider needs again to settle and release it, recorded on the run (JSON). */
  data?: unknown;
  /** Starts its agent: the handler's (`PlaceInput.spawner`), or the provider's own. */
  spawner: Spawner;
  /** Added to the run's environment. */
  env?: Record<string, string>;
  /** In a sandbox: what it sees. @default the workspace's folder */
  view?: SandboxView;
  /** Its folder was made for it (not the workspace's own): a sandbox user need not own the workspace. */
  madeForRun?: boolean;
  /** A command run before its agent, as its agent runs (in its sandbox, if it has one): a worktree's setup. */
  setup?: PlacedSetup;
}

/**
 * A provider's command run before the run's agent, through the agent's own spawner (confined
 * alike) under the run's marker, its process group killed with the run: never with the
 * service's privileges, since what it runs comes from the repository (an `npm ci` runs its
 * `preinstall`), which an agent may have written.
 */
export interface PlacedSetup {
  /** A shell command (`sh -c`). */
  command: string;
  /** The folder it runs in: inside what the run sees. */
  cwd: string;
  /** Added to the run's environment. */
  env: Record<string, string>;
  timeoutMs: number;
  /** What it is, in the message of its failure ("the worktree's setup command"). */
  what: string;
  /** The run's error code when it fails. */
  failureCode: string;
  /** It succeeded: the provider's `data` as the run is then recorded with. */
  succeeded(): Promise<unknown>;
  /** It failed: undo what `prepare` made (the run is then not placed). */
  failed(): Promise<void>;
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

/** What `settle` read: the change for the final record, its patch, and the folder that stays after `release`, if one does. */
export interface Settled {
  changes: Omit<RunChanges, 'worktree'>;
  patch: RunPatch;
  /** Shown as the record's `changes.worktree`. */
  kept?: string;
}

export interface PlaceInput {
  taskId: string;
  resumeId: string;
  workspace: Workspace;
  policy?: RunPolicy;
  /** The handler's spawner (its `spawner` option): what starts agents unless the provider has its own. */
  spawner: Spawner;
}

/** A run that has ended, as a placement's sweep sees it. */
export interface EndedRun {
  changes?: RunChanges;
}

export interface ReleaseInput {
  taskId: string;
  workspaceId: string;
  placement: PlacementRecord;
  /** What `settle` read, as the final record holds it; undefined when it could not be read. */
  changes?: RunChanges;
}

/** A placement provider: an entry of the handler's `placements` chain (docs/library.md: Placements). */
export interface PlacementProvider {
  /** What a run's `isolation` names to be placed by it. */
  readonly name: string;
  /** Where the processes of the runs it places live: asked to stop, reap and measure them. */
  readonly host: ProcessHost;
  /** Why a run cannot be placed as its policy asks (a worktree of a folder that is no git repository), or undefined. */
  check(run: Pick<PlaceInput, 'workspace' | 'policy'>): Promise<string | undefined>;
  /** The run's working directory and the spawner that starts its agent. */
  prepare(run: PlaceInput): Promise<Placed>;
  /** What the run changed, read before its final record is written. */
  settle(run: { taskId: string; placement: PlacementRecord }): Promise<Settled | undefined>;
  /** The run has ended (its final record is durable): undo what `prepare` made. */
  release(run: ReleaseInput): Promise<void>;
  /**
   * After a restart: what runs that have ended left behind is settled and released. `ended` answers
   * for a run that has ended, with what its final record says it changed (absent: it crashed before its placement was recorded).
   */
  sweep(a: { workspaces: Workspace[]; ended: (taskId: string) => Promise<EndedRun | undefined> }): Promise<void>;
}

export const inWorkspace: PlacementProvider = {
  name: IN_WORKSPACE,
  host: localHost,
  check: async () => undefined,
  prepare: async ({ workspace, spawner }) => ({ cwd: workspace.path, spawner }),
  settle: async () => undefined,
  release: async () => undefined,
  sweep: async () => undefined,
};
