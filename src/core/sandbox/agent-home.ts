import { existsSync, lchownSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Mount, SandboxUser } from './bubblewrap';
import { insideOf, realPath } from './paths';

/** What a sandboxed run's agent keeps and reads in its home. */
export interface AgentHomeInput {
  workspaceId: string;
  /** Where it keeps sessions and history, relative to HOME (a `.json` entry is a file): the workspace's own, read-write. */
  state: string[];
  /** Its executable configuration and login files, relative to HOME: the operator's, read-only. */
  config: string[];
  /** The run's environment: its `HOME`, XDG variables and `CODEX_HOME` place the entries. */
  env: Record<string, string>;
  /** Under a root service: the sandbox's user, who must own its state (only the entries themselves: what is inside them it wrote). */
  owner?: SandboxUser;
}

/** Where the XDG variables move an entry that defaults under HOME. */
const XDG: Array<[string, string]> = [
  ['.config/', 'XDG_CONFIG_HOME'],
  ['.local/share/', 'XDG_DATA_HOME'],
  ['.local/state/', 'XDG_STATE_HOME'],
  ['.cache/', 'XDG_CACHE_HOME'],
];

/** Where an entry lives for this environment: `$VAR/rest` under that variable, `.codex` under `CODEX_HOME`, XDG, else HOME. */
export function placeOf(entry: string, env: Record<string, string>): string | undefined {
  const named = /^\$([A-Z_]+)\/(.*)$/.exec(entry);
  if (named) return env[named[1] as string] ? join(env[named[1] as string] as string, named[2] as string) : undefined;
  if ((entry === '.codex' || entry.startsWith('.codex/')) && env.CODEX_HOME) return join(env.CODEX_HOME, entry.slice('.codex'.length));
  for (const [prefix, variable] of XDG) if (entry.startsWith(prefix) && env[variable]) return join(env[variable], entry.slice(prefix.length));
  return env.HOME ? join(env.HOME, entry) : undefined;
}

/**
 * The agent's home inside a sandbox (docs/security.md: Agent state): its state folders come from
 * a folder of the workspace's own under `root` (sessions resume, nothing is shared with the
 * operator or another workspace), and its configuration is the operator's, bound read-only over
 * them. Configuration that the operator does not have is removed from the workspace's folder
 * before each run, so a hook, MCP server or plugin that a run wrote there is never loaded by the
 * next one.
 */
export function agentHomeMounts(root: string, input: AgentHomeInput): Mount[] {
  const own = join(root, input.workspaceId);
  const mounts: Mount[] = [];
  const state: Array<{ entry: string; source: string; path: string }> = [];
  for (const entry of input.state) {
    const place = placeOf(entry, input.env);
    if (place === undefined) continue;
    const source = join(own, entry);
    if (!insideOf(source, own) || source === own) continue;
    if (entry.endsWith('.json')) {
      mkdirSync(dirname(source), { recursive: true });
      if (!existsSync(source)) writeFileSync(source, '{}\n');
    } else mkdirSync(source, { recursive: true });
    if (input.owner) lchownSync(source, input.owner.uid, input.owner.gid);
    const path = realPath(place);
    state.push({ entry, source, path });
    mounts.push({ kind: 'rw', source, path });
  }
  for (const entry of input.config) {
    const place = placeOf(entry, input.env);
    if (place === undefined) continue;
    const path = realPath(place);
    const holder = state.find((s) => insideOf(path, s.path) && path !== s.path);
    if (existsSync(place)) mounts.push({ kind: 'ro', source: realPath(place), path });
    else if (holder) rmSync(join(holder.source, path.slice(holder.path.length)), { recursive: true, force: true });
  }
  return mounts;
}
