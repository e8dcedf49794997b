import type { Workspace } from '../types';
import { credentialSources, findExecutable, isTheAgent, policyRefusal, presentCredentials, probe, probeEnv } from './preflight';
import type { AgentRegistry } from './registry';
import type { AgentAdapter, ProtocolFacts } from './types';

/** What `doctor` and `GET /api/agents` say about one agent on one workspace. */
export interface AgentCheck {
  agent: string;
  command: string;
  /** Named by the configuration: in the workspace's `agents`, its headless or default agent, or the installation default. */
  configured: boolean;
  /** The executable found on the run's `PATH`, or null. */
  path: string | null;
  /** The first line its `--version` printed, or null. */
  version: string | null;
  /** Whether the executable is really this agent; null when not found or the adapter has no way to tell. */
  isAgent: boolean | null;
  /** The flags the adapter passes that this version's usage does not list (null: not checked). */
  unknownFlags: string[] | null;
  /** Credential sources present (variable names, `~/` files): names only, never values. */
  credentials: string[];
  /** Every source the agent can take credentials from. */
  credentialSources: string[];
  /** Whether a run of it can start: found, the right program, its flags known, credentials if it needs them. */
  canRun: boolean;
  /** What it said of itself over its protocol, for an agent whose protocol can be asked (ACP's `initialize`); null otherwise. */
  protocol: ProtocolFacts | null;
  /** What is wrong, each saying what to do. */
  problems: string[];
}

export interface WorkspaceReport {
  workspaceId: string;
  agents: AgentCheck[];
  /** What is wrong with the workspace's own settings (an agent it names that is not enabled there). */
  problems: string[];
  /** What works but may surprise (a start naming no agent gets the workspace's most recent one). */
  warnings: string[];
}

/** The flag names an argv passes (`--x=v` counts as `--x`); values and positionals are not flags. */
function flagsOf(args: string[]): string[] {
  return args.filter((a) => /^-{1,2}[A-Za-z]/.test(a)).map((a) => a.split('=')[0] ?? a);
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const listed = (usage: string, flag: string) => new RegExp(`(^|[\\s,[(])${escapeRegExp(flag)}(?![\\w-])`, 'm').test(usage);

async function checkAgent(adapter: AgentAdapter, workspace: Workspace, env: Record<string, string>, configured: boolean): Promise<AgentCheck> {
  const sample = { prompt: 'doctor', workspacePath: workspace.path, resumeId: 'ses_doctor', permissions: 'full' } as const;
  // Every flag it may pass here: resuming, and its read-only ones on a read-only workspace.
  const invocations = [
    adapter.invocation(sample),
    ...(adapter.supportsResume ? [adapter.invocation({ ...sample, agentSessionId: 'doctor' })] : []),
    ...(adapter.readOnly && workspace.run?.permissions === 'read-only' ? [adapter.invocation({ ...sample, permissions: 'read-only' })] : []),
  ];
  const command = invocations[0]?.command ?? adapter.command;
  const sources = credentialSources(adapter);
  const refusal = policyRefusal(adapter, workspace.run);
  const check: AgentCheck = {
    agent: adapter.name,
    command,
    configured,
    path: findExecutable(command, env.PATH) ?? null,
    version: null,
    isAgent: null,
    unknownFlags: null,
    credentials: presentCredentials(adapter, env),
    credentialSources: sources,
    canRun: false,
    protocol: null,
    problems: [...(adapter.setupProblems ?? []), ...(refusal ? [refusal] : [])],
  };
  if (!check.path) {
    check.problems.push(`"${command}" is not on the PATH of workspace "${workspace.id}": install it, or set PATH in the workspace's env`);
    return check;
  }
  const version = await probe(check.path, ['--version'], env);
  check.version = version.output.trim().split('\n')[0] || null;
  if (version.timedOut) check.problems.push(`"${command} --version" did not answer within 60 s (a busy machine?): its version is unknown`);
  if (adapter.identity) {
    check.isAgent = await isTheAgent(adapter, check.path, env);
    if (!check.isAgent) check.problems.push(`${check.path} is not the ${adapter.name} agent CLI: put the real one first on the PATH`);
  }
  await checkFlags(check, adapter, invocations, env);
  const first = invocations[0];
  if (first) await checkProtocol(check, adapter, { file: check.path, invocation: first, cwd: workspace.path, env });
  if (adapter.credentials && check.credentials.length === 0) {
    const hint = `no credentials found: set ${sources.join(' or ')}`;
    check.problems.push(adapter.credentials.required ? hint : `${hint} (unless it is configured another way)`);
  }
  check.canRun =
    (adapter.setupProblems ?? []).length === 0 &&
    refusal === undefined &&
    check.isAgent !== false &&
    (check.unknownFlags ?? []).length === 0 &&
    check.protocol?.error === undefined &&
    !(adapter.credentials?.required && check.credentials.length === 0);
  return check;
}

/** Whether this version's usage lists every flag the adapter passes. */
async function checkFlags(check: AgentCheck, adapter: AgentAdapter, invocations: Array<{ args: string[] }>, env: Record<string, string>): Promise<void> {
  if (!adapter.help || !check.path) return;
  const usage = await probe(check.path, adapter.help, env);
  if (usage.timedOut) {
    check.problems.push(`"${check.command} ${adapter.help.join(' ')}" did not answer within 60 s (a busy machine?): its flags could not be checked`);
    return;
  }
  check.unknownFlags = [...new Set(invocations.flatMap((i) => flagsOf(i.args)))].filter(
    (flag) => !listed(usage.output, flag) && !adapter.unlistedFlags?.includes(flag),
  );
  if (check.unknownFlags.length > 0) {
    check.problems.push(`this version (${check.version ?? 'unknown'}) does not list ${check.unknownFlags.join(', ')}: upgrade ${adapter.name}`);
  }
}

/** Asks the agent of itself over its protocol (ACP's `initialize`): it must answer, and load sessions if it is to resume. */
async function checkProtocol(
  check: AgentCheck,
  adapter: AgentAdapter,
  o: { file: string; invocation: { args: string[]; env?: Record<string, string> }; cwd: string; env: Record<string, string> },
): Promise<void> {
  const handshake = adapter.protocol?.handshake;
  if (!handshake) return;
  // PATH and HOME, its credentials and its own variables: what it needs to answer, and nothing of the service's.
  const credentials = Object.fromEntries((adapter.credentials?.env ?? []).flatMap((name) => (o.env[name] === undefined ? [] : [[name, o.env[name]]])));
  const facts = await handshake({ file: o.file, args: o.invocation.args, cwd: o.cwd, env: { ...probeEnv(o.env), ...credentials, ...o.invocation.env } });
  check.protocol = facts;
  if (facts.error !== undefined) check.problems.push(`${adapter.name} did not answer ${facts.protocol}'s initialize: ${facts.error}`);
  else if (adapter.supportsResume && facts.loadSession !== true) {
    check.problems.push(`${adapter.name} says it cannot load a session over ${facts.protocol}: its Sessions will not resume (use its stdout twin to resume)`);
  }
}

/**
 * Checks every headless-capable agent enabled on a workspace, as a run there would see it
 * (the workspace's `PATH` and `HOME` over the service's).
 */
export async function diagnoseWorkspace(input: {
  registry: AgentRegistry;
  workspace: Workspace;
  baseEnv: NodeJS.ProcessEnv;
  defaultAgent?: string;
  /** Told as each agent's check ends (doctor's progress lines). */
  onChecked?: (check: AgentCheck) => void;
}): Promise<WorkspaceReport> {
  const { registry, workspace } = input;
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...input.baseEnv, ...workspace.env })) if (value !== undefined) env[key] = value;
  const named = new Set([...(workspace.agents ?? []), workspace.headlessAgent, workspace.defaultAgent, input.defaultAgent]);
  const adapters = registry
    .names()
    .map((name) => registry.get(name))
    .filter((a): a is AgentAdapter => a?.kind === 'agent' && registry.isEnabled(workspace, a.name));
  const checks = adapters.map((a) =>
    checkAgent(a, workspace, env, named.has(a.name)).then((check) => {
      input.onChecked?.(check);
      return check;
    }),
  );
  const agents = await Promise.all(checks);
  return {
    workspaceId: workspace.id,
    agents,
    problems: [...settingProblems(registry, workspace), ...credentialProblems(agents)],
    warnings: selectionWarnings(workspace, agents),
  };
}

/**
 * With no fixed agent and more than one that can run, a start that names none gets the one the
 * workspace ran last (docs/http-api.md: Agent selection): one manual run with another agent
 * changes what every later unattended start runs.
 */
function selectionWarnings(workspace: Workspace, agents: AgentCheck[]): string[] {
  const runnable = agents.filter((a) => a.canRun).map((a) => a.agent);
  if (workspace.headlessAgent !== undefined || runnable.length < 2) return [];
  return [
    `it has no headlessAgent: a start that names no agent gets the one it ran last (of ${runnable.join(', ')}), so one run with another agent changes what later unattended starts run; set "headlessAgent", or name the agent in each start or run spec`,
  ];
}

/**
 * Agents that can start but found no credentials (theirs are optional where they may be configured
 * another way) would fail at their first model call: a workspace where every one is so cannot run
 * anything, and doctor says so (exit 1) rather than passing.
 */
function credentialProblems(agents: AgentCheck[]): string[] {
  const runnable = agents.filter((a) => a.canRun);
  if (runnable.length === 0 || runnable.some((a) => a.credentials.length > 0 || a.credentialSources.length === 0)) return [];
  return [`none of its agents found credentials (${runnable.map((a) => a.agent).join(', ')}): set one's, as its line above says`];
}

/** A headless or default agent the workspace names but does not enable would never run there. */
function settingProblems(registry: AgentRegistry, workspace: Workspace): string[] {
  return (['headlessAgent', 'defaultAgent'] as const).flatMap((key) => {
    const name = workspace[key];
    if (name === undefined || registry.isEnabled(workspace, name)) return [];
    return [`its ${key} "${name}" is not enabled on it: add "${name}" to the workspace's agents, or name one that is`];
  });
}
