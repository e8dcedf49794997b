import { Refusal } from '../../contract/problems';
import type { AgentRule } from '../../contract/records';
import type { Workspace } from '../types';
import { BUILTIN_AGENTS } from './builtins';
import { type CommandAgentDefinition, createCommandAgent } from './command-agent';
import { findExecutable, isTheAgent } from './preflight';
import type { AgentAdapter } from './types';

export interface SelectionInput {
  workspace: Workspace;
  /** The workspace's most recent headless agent. */
  lastAgent?: string;
  /** The installation default. */
  defaultAgent?: string;
  /** `PATH` and `HOME` the agent would run with: only agents found there, and really that agent, are taken. */
  env: Record<string, string>;
  /** Where the workspace runs on another machine (a fleet's member): the agents installed there, taken in place of looking here. */
  installed?: readonly string[];
}

/** Every adapter the service knows: the built-ins in the documented order (docs/agents.md), then custom agents. */
export class AgentRegistry {
  private readonly adapters = new Map<string, AgentAdapter>();

  constructor(custom: Record<string, CommandAgentDefinition | AgentAdapter> = {}) {
    for (const adapter of BUILTIN_AGENTS) this.adapters.set(adapter.name, adapter);
    for (const [name, definition] of Object.entries(custom)) {
      if (this.adapters.has(name)) throw new Error(`agent "${name}" is already a built-in agent`);
      this.adapters.set(name, 'invocation' in definition ? { ...definition, name } : createCommandAgent(name, definition));
    }
  }

  get(name: string): AgentAdapter | undefined {
    return this.adapters.get(name);
  }

  names(): string[] {
    return [...this.adapters.keys()];
  }

  isEnabled(workspace: Workspace, name: string): boolean {
    return workspace.agents === undefined || workspace.agents.includes(name);
  }

  /** The checks on a named agent, in the documented order (docs/http-api.md: Errors). */
  check(workspace: Workspace, name: string): AgentAdapter {
    const adapter = this.adapters.get(name);
    if (!adapter) throw new Refusal('agent_unknown', `No agent is named "${name}".`);
    if (adapter.kind !== 'agent') {
      throw new Refusal('agent_not_headless', `"${name}" is ${adapter.kind === 'shell' ? 'the shell adapter' : 'a utility agent'}; it cannot run headless.`);
    }
    if (!this.isEnabled(workspace, name)) {
      throw new Refusal('agent_disabled', `Agent "${name}" is not enabled on workspace "${workspace.id}".`);
    }
    return adapter;
  }

  /**
   * Picks the agent of a run that names none (a named one passes `check`; its executable is
   * checked at spawn, which fails with 500 spawn_failed), in the seed's order: fixed
   * headless agent, most recent, workspace default, installation default, then every adapter
   * in registry order; a candidate is taken only if headless-capable, enabled, found, and the
   * executable found is really that agent (not another program of the same name).
   */
  /** The workspace's enabled agents found installed with `env`, in the order selection takes them (what a fleet's member advertises). */
  async installedFor(workspace: Workspace, env: Record<string, string>): Promise<string[]> {
    const found: string[] = [];
    for (const [name, adapter] of this.adapters) {
      if (adapter.kind === 'agent' && this.isEnabled(workspace, name) && (await this.isInstalled(adapter, env))) found.push(name);
    }
    return found;
  }

  private async isInstalled(adapter: AgentAdapter, env: Record<string, string>): Promise<boolean> {
    const file = findExecutable(adapter.command, env.PATH);
    return file !== undefined && (await isTheAgent(adapter, file, env));
  }

  async select(input: SelectionInput): Promise<{ adapter: AgentAdapter; chosenBy: AgentRule }> {
    const { workspace } = input;
    const candidates: Array<[string | undefined, AgentRule]> = [
      [workspace.headlessAgent, 'headlessAgent'],
      [input.lastAgent, 'recent'],
      [workspace.defaultAgent, 'workspaceDefault'],
      [input.defaultAgent, 'installationDefault'],
      ...[...this.adapters.keys()].map((name): [string, AgentRule] => [name, 'first']),
    ];
    for (const [name, chosenBy] of candidates) {
      if (name === undefined) continue;
      const adapter = this.adapters.get(name);
      if (adapter?.kind !== 'agent' || !this.isEnabled(workspace, name)) continue;
      if (input.installed ? input.installed.includes(name) : await this.isInstalled(adapter, input.env)) return { adapter, chosenBy };
    }
    throw new Refusal('no_headless_agent', `No headless-capable agent is enabled and installed for workspace "${workspace.id}".`);
  }
}
