import { isAbsolute } from 'node:path';
import { isValidId } from '../contract/ids';
import { Refusal } from '../contract/problems';
import type { Workspace } from './types';

export type WorkspaceResolver = (id: string) => Workspace | undefined | Promise<Workspace | undefined>;

/** The workspaces runs may target: a checked list, or a resolver asked with validated ids only. */
export class Workspaces {
  private readonly listed: Map<string, Workspace> | undefined;
  private readonly resolve: WorkspaceResolver;

  constructor(
    source: Workspace[] | WorkspaceResolver,
    /** Other instances share the store: a missing workspace may be configured on them. */
    private readonly shared: boolean,
  ) {
    const listed = Array.isArray(source) ? checkList(source) : undefined;
    this.listed = listed;
    this.resolve = listed ? (id) => listed.get(id) : (source as WorkspaceResolver);
  }

  /** The listed workspaces; undefined when they come from a resolver. */
  all(): Workspace[] | undefined {
    return this.listed && [...this.listed.values()];
  }

  async find(id: string): Promise<Workspace | undefined> {
    return isValidId(id) ? this.resolve(id) : undefined;
  }

  /** The workspace, or 404 workspace_not_found. */
  async require(id: string): Promise<Workspace> {
    const ws = await this.find(id);
    // In a fleet the workspace may be configured on other instances: say where the answer comes from.
    if (!ws) throw new Refusal('workspace_not_found', this.shared ? `No workspace "${id}" on this instance.` : `No workspace "${id}".`);
    return ws;
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
    map.set(ws.id, ws);
  }
  return map;
}
