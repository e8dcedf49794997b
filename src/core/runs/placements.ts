/**
 * @module The chain of placement providers (placement.ts): the handler's `placements`, then the
 * built-in worktree, then the workspace's own folder. A run's `isolation` names its provider
 * (the first of that name); what a run recorded names the provider that settles and releases it,
 * and whose host answers for its processes after a restart.
 */
import type { RunPolicy } from '../../contract/records';
import type { ProcessHost } from '../process/process-host';
import type { PlacementRecord, StoredRun } from '../types';
import { IN_WORKSPACE, type PlaceInput, type Placed, type PlacementProvider, type ReleaseInput, type Settled } from './placement';

/** A placed run: what its provider answered, with the provider's name and host. */
export interface PlacedRun extends Placed {
  provider: string;
  host: ProcessHost;
}

/** The provider that worktree records written before providers were named came from. */
const EARLIER_WORKTREE = 'worktree';

/** The provider a run's policy names: its `isolation`, or (policies recorded before it was) `worktree` where one was asked. */
export const providerNamed = (policy: RunPolicy | undefined): string => policy?.isolation ?? (policy?.worktree ? EARLIER_WORKTREE : IN_WORKSPACE);

/** A recorded placement as `{ provider, cwd, data }`, also one written before providers were named (`{ cwd, worktree? }`). */
export function placementOf(stored: NonNullable<StoredRun['placement']>): PlacementRecord {
  if ('provider' in stored) return stored;
  return stored.worktree ? { provider: EARLIER_WORKTREE, cwd: stored.cwd, data: stored.worktree } : { provider: IN_WORKSPACE, cwd: stored.cwd };
}

/** The part of a placed run that is recorded on it. */
export const placementRecord = (placed: PlacedRun): PlacementRecord => ({
  provider: placed.provider,
  cwd: placed.cwd,
  ...(placed.data === undefined ? {} : { data: placed.data }),
});

export class Placements {
  private readonly byName = new Map<string, PlacementProvider>();

  /** `providers` in order: the first of a name wins (a handler's own `worktree` or `none` takes the built-in's place). */
  constructor(providers: readonly PlacementProvider[]) {
    for (const provider of providers) if (!this.byName.has(provider.name)) this.byName.set(provider.name, provider);
  }

  /** The registered names, what `isolation` may name. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** Why `isolation` cannot be used, or undefined for a registered provider's name. */
  notRegistered(isolation: string | undefined): string | undefined {
    if (isolation === undefined || this.byName.has(isolation)) return undefined;
    return `isolation "${isolation}" names no placement provider (registered: ${this.names().join(', ')})`;
  }

  async check(run: Pick<PlaceInput, 'workspace' | 'policy'>): Promise<string | undefined> {
    const name = providerNamed(run.policy);
    return this.notRegistered(name) ?? this.require(name).check(run);
  }

  async prepare(run: PlaceInput): Promise<PlacedRun> {
    const provider = this.require(providerNamed(run.policy));
    const placed = await provider.prepare(run);
    return { ...placed, provider: provider.name, host: provider.host };
  }

  async settle(run: { taskId: string; placement: NonNullable<StoredRun['placement']> }): Promise<Settled | undefined> {
    const placement = placementOf(run.placement);
    return this.require(placement.provider).settle({ taskId: run.taskId, placement });
  }

  async release(run: Omit<ReleaseInput, 'placement'> & { placement: NonNullable<StoredRun['placement']> }): Promise<void> {
    const placement = placementOf(run.placement);
    return this.require(placement.provider).release({ ...run, placement });
  }

  /** Every provider sweeps what ended runs left; one's failure is logged and leaves the others theirs. */
  async sweep(a: Parameters<PlacementProvider['sweep']>[0], log: (message: string, error?: unknown) => void): Promise<void> {
    for (const provider of this.byName.values())
      await provider.sweep(a).catch((error: unknown) => log(`could not sweep what crashed runs left with placement "${provider.name}"`, error));
  }

  /**
   * The host of a recorded run's processes: its placement's provider's, else (it crashed before
   * its placement was recorded) the provider its policy named. A provider no longer registered: the workspace's own, this machine.
   */
  hostOf(run: Pick<StoredRun, 'placement' | 'policy'>): ProcessHost {
    const name = run.placement ? placementOf(run.placement).provider : providerNamed(run.policy);
    return (this.byName.get(name) ?? this.require(IN_WORKSPACE)).host;
  }

  private require(name: string): PlacementProvider {
    const provider = this.byName.get(name);
    if (!provider) throw new Error(`no placement provider is named "${name}"`);
    return provider;
  }
}

/** Throws, naming where, when a configured `isolation` names no registered provider. */
export function checkIsolation(placements: Placements, settings: { isolation?: string } | undefined, where: string): void {
  const problem = placements.notRegistered(settings?.isolation);
  if (problem !== undefined) throw new Error(`${where}: ${problem}`);
}
