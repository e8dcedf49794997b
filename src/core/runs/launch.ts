import type { RunPolicy } from '../../contract/records';
import { policyRefusal, preflight } from '../agents/preflight';
import { SpawnFailure } from '../process/spawner';
import type { Sandbox } from '../sandbox/sandbox';
import type { AgentAdapter, AgentRunInput } from '../agents/types';
import type { Workspace } from '../types';
import { buildRunEnv } from './env';
import type { RunPlacement } from './placement';
import { type SupervisedProcess, superviseProcess } from './supervisor';

/** Grace between SIGTERM and SIGKILL for the watchdog and cancel. */
export const KILL_GRACE_MS = 5000;

export interface LaunchOptions {
  adapter: AgentAdapter;
  input: Omit<AgentRunInput, 'workspacePath'>;
  workspace: Workspace;
  placement: RunPlacement;
  timeoutMs: number;
  /** The environment runs start from (minus what `buildRunEnv` strips). */
  baseEnv: NodeJS.ProcessEnv;
  adminToken?: string;
  /** Put first on the run's PATH (`headless-inbox`). */
  binDir?: string;
  /** The run's own variables: its URL, ids and token. */
  run: Parameters<typeof buildRunEnv>[0]['run'];
  onStdoutLine(line: string): void;
  /** Its confinement, if any, and the sandbox that applies it. */
  policy?: RunPolicy;
  sandbox: Sandbox;
}

/** Places the run, builds its environment, checks the agent can start, and starts it under supervision. */
export async function launchProcess(o: LaunchOptions): Promise<SupervisedProcess> {
  const placed = await o.placement.place({ taskId: o.run.HEADLESS_TASK_ID, workspace: o.workspace });
  const { cwd } = placed;
  const readOnly = o.policy?.permissions === 'read-only';
  const refusal = policyRefusal(o.adapter, o.policy);
  if (refusal) throw new SpawnFailure(refusal);
  const invocation = o.adapter.invocation({ ...o.input, workspacePath: cwd });
  const env = buildRunEnv({
    base: o.baseEnv,
    adminToken: o.adminToken,
    adapterEnv: invocation.env,
    workspaceEnv: o.workspace.env,
    cwd,
    binDir: o.binDir,
    run: o.run,
  });
  await preflight(o.adapter, invocation.command, env);
  const spawner = o.policy?.sandbox
    ? o.sandbox.confine(placed.spawner, {
        workspace: o.workspace.path,
        cwd,
        readOnly,
        stateDirs: o.adapter.stateDirs ?? [],
        env,
        network: o.workspace.network ?? [],
      })
    : placed.spawner;
  return superviseProcess({
    spawner,
    timeoutMs: o.timeoutMs,
    killGraceMs: KILL_GRACE_MS,
    spawn: { command: invocation.command, args: invocation.args, cwd, stdin: invocation.stdin, env, onStdoutLine: o.onStdoutLine },
  });
}
