import { parseArgs } from 'node:util';
import { type AgentCheck, type WorkspaceReport, diagnoseWorkspace } from '../core/agents/doctor';
import { AgentRegistry } from '../core/agents/registry';
import { SERVICE_SECRETS } from '../core/runs/env';
import { loadTriggers } from '../core/triggers/trigger-spec';
import { ConfigError, type DaemonConfig, loadConfig } from './config';
import { fail } from './fail';

export const DOCTOR_USAGE = `Usage: headless-run-webhook doctor [--config FILE] [--json]

For every agent enabled on each workspace: found on the PATH or not, its version, whether it
is really that agent, whether this version takes the flags the adapter passes, which
credentials it has (names only), and for an ACP agent what it answers to initialize; a custom agent's placeholders; a workspace's headless or
default agent that is not enabled there. Exits 1 when an agent the config names cannot run, a
workspace has none that can, or its settings are wrong. Progress goes to stderr.

  --config FILE    config file (default: ./headless.config.json if present)
  --json           the report as JSON`;

function line(check: AgentCheck): string {
  const head = `  ${check.agent.padEnd(9)} ${stateOf(check).padEnd(8)}${check.configured ? '*' : ' '} ${check.version ?? '-'}`;
  const details = [
    check.path ? `at ${check.path}` : undefined,
    check.credentials.length > 0 ? `credentials: ${check.credentials.join(', ')}` : undefined,
    check.protocol?.version === undefined
      ? undefined
      : `${check.protocol.protocol} v${check.protocol.version}${check.protocol.loadSession ? ', loads sessions' : ''}`,
    ...check.problems,
  ].filter(Boolean);
  return [head, ...details.map((d) => `      ${d}`)].join('\n');
}

/** Whether the report shows something the caller must fix. */
export function reportFails(reports: WorkspaceReport[]): boolean {
  return reports.some((r) => r.problems.length > 0 || !r.agents.some((a) => a.canRun) || r.agents.some((a) => a.configured && !a.canRun));
}

const stateOf = (check: AgentCheck) => (!check.path ? 'missing' : check.canRun ? (check.problems.length > 0 ? 'warn' : 'ok') : 'broken');

export async function doctor(argv: string[]): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (error) {
    fail(`${error instanceof Error ? error.message : String(error)}\n${DOCTOR_USAGE}`);
  }
  if (values.help) {
    process.stdout.write(`${DOCTOR_USAGE}\n`);
    return;
  }
  let config;
  try {
    config = loadConfig(values.config, process.cwd());
  } catch (error) {
    fail(error instanceof ConfigError ? error.message : String(error));
  }
  const registry = new AgentRegistry(config.agents);
  const env = { ...process.env };
  for (const name of SERVICE_SECRETS) delete env[name];
  // Probing a slow CLI takes seconds: say what is being checked, on stderr, as each ends.
  const started = Date.now();
  const progress = (workspaceId: string) => (check: AgentCheck) =>
    process.stderr.write(`checked ${check.agent} on ${workspaceId}: ${stateOf(check)} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  process.stderr.write(`checking the agents of ${config.workspaces.length} workspace(s)…\n`);
  const reports = await Promise.all(
    config.workspaces.map((workspace) =>
      diagnoseWorkspace({ registry, workspace, baseEnv: env, defaultAgent: config.defaultAgent, onChecked: progress(workspace.id) }),
    ),
  );
  const triggers = checkTriggers(config, env);
  if (values.json) process.stdout.write(`${JSON.stringify({ workspaces: reports, triggers }, null, 2)}\n`);
  else {
    for (const report of reports) {
      const path = config.workspaces.find((w) => w.id === report.workspaceId)?.path ?? '';
      process.stdout.write(`workspace ${report.workspaceId} (${path})\n${report.agents.map(line).join('\n')}\n`);
      for (const problem of report.problems) process.stdout.write(`  ${problem}\n`);
      for (const warning of report.warnings) process.stdout.write(`  warning: ${warning}\n`);
      if (!report.agents.some((a) => a.canRun))
        process.stdout.write('  no agent can run here: install one of the agents above, or enable one that is installed\n');
    }
    for (const t of triggers)
      process.stdout.write(`trigger ${t.name}: ${t.problems.length > 0 ? 'broken' : 'ok'}\n${[...t.problems, ...t.warnings].map((p) => `  ${p}\n`).join('')}`);
    process.stdout.write('(* named by the config)\n');
  }
  if (reportFails(reports) || triggers.some((t) => t.problems.length > 0)) process.exitCode = 1;
}

interface TriggerCheck {
  name: string;
  /** What stops it from working: a template variable, a secret that is not there, an agent not enabled on its workspace. */
  problems: string[];
  /** Payload fields its templates read that the sender's example does not have: checked at each delivery only. */
  warnings: string[];
}

/** Each trigger, checked on its own: its templates against the sender's payload, its secret present, its agent enabled. */
function checkTriggers(config: DaemonConfig, env: NodeJS.ProcessEnv): TriggerCheck[] {
  return (config.triggers ?? []).map((definition, i) => {
    // Loaded on its own, it is triggers[0]: named as the config file numbers it.
    const where = (text: string) => text.replace(/^triggers\[0\]/, `triggers[${i}]`);
    const workspace = config.workspaces.find((w) => w.id === definition.workspace);
    const problems: string[] = [];
    let warnings: string[] = [];
    try {
      warnings = (loadTriggers([definition], (id) => config.workspaces.some((w) => w.id === id), env).get(definition.name)?.warnings ?? []).map(where);
    } catch (error) {
      problems.push(where((error as Error).message));
    }
    const agent = definition.run?.agent;
    if (agent && workspace?.agents && !workspace.agents.includes(agent))
      problems.push(`its agent ${agent} is not enabled on workspace ${definition.workspace}`);
    return { name: definition.name, problems, warnings };
  });
}
