import { isAbsolute } from 'node:path';
import { ID_PATTERN, isValidId } from '../contract/ids';
import { Refusal } from '../contract/problems';
import * as v from 'valibot';
import type { AdvertisedWorkspace } from './fleet/fleet';
import { checkSpecLayer } from './runs/run-spec';
import { checkPublishSettings, publishUnavailable } from './worktrees/publish-settings';
import type { Workspace } from './types';

const positive = v.pipe(v.number(), v.integer(), v.minValue(1));
const names = v.array(v.string());
/** The shape of what a member advertises, checked as it is read (its run spec by the spec's own check). */
const AdvertisedSchema = v.object({
  id: v.pipe(v.string(), v.regex(ID_PATTERN)),
  tag: v.optional(v.string()),
  agents: v.optional(names),
  headlessAgent: v.optional(v.string()),
  defaultAgent: v.optional(v.string()),
  queue: v.optional(v.union([v.literal(false), v.object({ max: v.optional(positive), ttlMs: v.optional(positive) })])),
  run: v.optional(v.record(v.string(), v.unknown())),
  limits: v.optional(v.object({ runsPerDay: v.optional(positive), spendPerDayUsd: v.optional(v.pipe(v.number(), v.gtValue(0))) })),
  labels: v.optional(names),
  installed: names,
});

/** What a member advertises of a workspace it runs (docs/deployment.md: Workers and labels): never its folder, its env, its webhook or a secret. */
export type Advertised = Pick<Workspace, 'id' | 'tag' | 'agents' | 'headlessAgent' | 'defaultAgent' | 'queue' | 'run' | 'limits' | 'labels'> & {
  /** Its enabled agents installed on the member, in selection order: a start elsewhere that names none is given one of these. */
  installed: string[];
};

export type WorkspaceResolver = (id: string) => Workspace | undefined | Promise<Workspace | undefined>;

export interface WorkspacesOptions {
  /** Other instances share the store: a missing workspace may be run by them. */
  shared: boolean;
  /** This instance's labels: it runs a workspace only if it has every label the workspace asks for. */
  labels: readonly string[];
  /** A workspace another member of the fleet runs, as it advertised it. */
  advertised(id: string): Promise<AdvertisedWorkspace | undefined>;
  log: (message: string) => void;
}

/**
 * The workspaces runs may target: a checked list, or a resolver asked with validated ids only; in
 * a fleet also those other members run, known by what they advertised (never their folder, env or
 * secrets): their starts are accepted here and queued for those members.
 */
export class Workspaces {
  private readonly listed: Map<string, Workspace> | undefined;
  private readonly resolve: WorkspaceResolver;
  /** Those known only by what another member advertised (they never run here), with the agents installed there. */
  private readonly elsewhere = new WeakMap<Workspace, string[]>();

  constructor(
    source: Workspace[] | WorkspaceResolver,
    private readonly o: WorkspacesOptions,
  ) {
    const listed = Array.isArray(source) ? checkList(source) : undefined;
    this.listed = listed;
    this.resolve = listed ? (id) => listed.get(id) : (source as WorkspaceResolver);
  }

  /** The agents installed for a workspace another member runs; undefined for one configured here. */
  installedElsewhere(ws: Workspace): readonly string[] | undefined {
    return this.elsewhere.get(ws);
  }

  /** Whether this instance runs the workspace's agents: it is configured here, with every label it asks for. */
  runsHere(ws: Workspace): boolean {
    return !this.elsewhere.has(ws) && (ws.labels ?? []).every((label) => this.o.labels.includes(label));
  }

  /** A workspace whose runs, Inbox and usage may be read here: configured here, or (in a fleet) advertised by a living member. */
  async known(id: string): Promise<Workspace> {
    return (await this.find(id)) ?? this.placed(id, undefined);
  }

  /** A workspace a start may target: one configured here, or, in a fleet, one another member runs; else 404 workspace_not_found. */
  async forStart(id: string): Promise<Workspace> {
    const here = await this.find(id);
    return here && this.runsHere(here) ? here : this.placed(id, here);
  }

  /** The workspace as the member of the fleet that runs it advertised it (`here`: configured here without its labels). */
  private async placed(id: string, here: Workspace | undefined): Promise<Workspace> {
    if (!this.o.shared || !isValidId(id)) return here ?? this.missing(id);
    // Configured here without its labels: as where it is not configured, what the member that runs it advertised decides.
    const advertised = this.checked(id, await this.o.advertised(id));
    if (!advertised && here)
      throw new Refusal(
        'workspace_not_found',
        `Workspace "${id}" asks for labels ${JSON.stringify(here.labels)}, and no member of the fleet with them runs it now.`,
      );
    if (!advertised) throw new Refusal('workspace_not_found', `No workspace "${id}" on this instance, and no member of the fleet runs one.`);
    // No folder here: its runs are queued for a member that has one.
    const { installed, ...shown } = advertised;
    const ws: Workspace = { ...shown, path: '' };
    this.elsewhere.set(ws, installed);
    return ws;
  }

  /** The listed workspaces; undefined when they come from a resolver. */
  all(): Workspace[] | undefined {
    return this.listed && [...this.listed.values()];
  }

  async find(id: string): Promise<Workspace | undefined> {
    return isValidId(id) ? this.resolve(id) : undefined;
  }

  /** The workspace configured here, or 404 workspace_not_found. */
  async require(id: string): Promise<Workspace> {
    return (await this.find(id)) ?? this.missing(id);
  }

  /** The workspace this instance runs (configured here, its labels met), or 404 workspace_not_found: a queued run waits for a member that does. */
  async runnable(id: string): Promise<Workspace> {
    const ws = await this.require(id);
    if (!this.runsHere(ws)) throw new Refusal('workspace_not_found', `Workspace "${id}" asks for labels this instance does not have.`);
    return ws;
  }

  /** What another member advertised, if it is a definition of workspace `id` this instance can use: a row of the shared table is input, never trusted as it is. */
  private checked(id: string, advertised: AdvertisedWorkspace | undefined): Advertised | undefined {
    if (advertised === undefined) return undefined;
    const parsed = v.safeParse(AdvertisedSchema, advertised);
    let problem = parsed.success ? (parsed.output.id === id ? undefined : `it is of workspace "${parsed.output.id}"`) : parsed.issues[0].message;
    if (problem === undefined && parsed.success) {
      try {
        checkSpecLayer(parsed.output.run, `workspace "${id}"`, { agent: false });
        return parsed.output as Advertised;
      } catch (error) {
        problem = (error as Error).message;
      }
    }
    this.o.log(`what a member advertised of workspace "${id}" is not used: ${problem}`);
    return undefined;
  }

  private missing(id: string): never {
    // In a fleet the workspace may be configured on other instances: say where the answer comes from.
    throw new Refusal('workspace_not_found', this.o.shared ? `No workspace "${id}" on this instance.` : `No workspace "${id}".`);
  }

  /** The listed workspaces this instance runs. */
  runHere(): Workspace[] {
    return (this.all() ?? []).filter((ws) => this.runsHere(ws));
  }

  /** What this instance tells the fleet of the listed workspaces it runs: what a start needs, never a folder, an env or a secret. */
  advertisable(installedFor: (ws: Workspace) => Promise<string[]>): Promise<Advertised[]> {
    return Promise.all(this.runHere().map(async (ws) => ({ ...advertisedOf(ws), installed: await installedFor(ws) })));
  }

  /** What the API shows of the listed ones. */
  publicList(): Array<Pick<Workspace, 'id' | 'tag'>> {
    return (this.all() ?? []).map((ws) => ({ id: ws.id, ...(ws.tag === undefined ? {} : { tag: ws.tag }) }));
  }
}

function checkList(list: Workspace[]): Map<string, Workspace> {
  const map = new Map<string, Workspace>();
  for (const ws of list) {
    if (!isValidId(ws.id)) throw new Error(`workspace id "${ws.id}" must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`);
    if (map.has(ws.id)) throw new Error(`workspace id "${ws.id}" is listed twice`);
    if (!isAbsolute(ws.path)) throw new Error(`workspace "${ws.id}" needs an absolute path, not "${ws.path}"`);
    if (ws.publishTo !== undefined) checkPublishSettings(ws.publishTo, `workspace "${ws.id}"`);
    const unpublishable = publishUnavailable(ws, { ...ws.run, isolation: ws.run?.isolation ?? 'none' });
    if (unpublishable !== undefined) throw new Error(`workspace "${ws.id}": run.publish cannot be: ${unpublishable}`);
    map.set(ws.id, ws);
  }
  return map;
}

function advertisedOf(ws: Workspace): Omit<Advertised, 'installed'> {
  // Not its webhook: the member that takes a run adds its own (its URL may carry a token).
  const { id, tag, agents, headlessAgent, defaultAgent, queue, run, limits, labels } = ws;
  const shown: Omit<Advertised, 'installed'> = { id, tag, agents, headlessAgent, defaultAgent, queue, run, limits, labels };
  return JSON.parse(JSON.stringify(shown)) as Omit<Advertised, 'installed'>;
}

/** Labels: names as ids are (`gpu`, `linux-arm64`), each once. */
export function checkLabels(labels: string[] | undefined, where: string): string[] {
  for (const [i, label] of (labels ?? []).entries()) {
    if (typeof label !== 'string' || !isValidId(label)) throw new Error(`${where}[${i}] must match ${ID_PATTERN.source}, not ${JSON.stringify(label)}`);
    if (labels?.indexOf(label) !== i) throw new Error(`${where} lists "${label}" twice`);
  }
  return labels ?? [];
}
