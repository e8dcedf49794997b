/** The environment of a run (README: Start a run, The Inbox). */

/** Variables that break nested agents or inject code into Node-based CLIs. */
const STRIPPED = /^(CLAUDECODE|CLAUDE_CODE_.*|NODE_OPTIONS|HEADLESS_ADMIN_TOKEN|HEADLESS_(API_URL|WORKSPACE_ID|TASK_ID|RESUME_ID|RUN_TOKEN))$/;

export interface RunVariables {
  HEADLESS_API_URL: string;
  HEADLESS_WORKSPACE_ID: string;
  HEADLESS_TASK_ID: string;
  HEADLESS_RESUME_ID: string;
  HEADLESS_RUN_TOKEN: string;
}

export interface RunEnvInput {
  base: NodeJS.ProcessEnv;
  /** Removed wherever it appears, under any variable name. */
  adminToken?: string;
  adapterEnv?: Record<string, string>;
  workspaceEnv?: Record<string, string>;
  run: RunVariables;
}

/**
 * The service's environment minus secrets and nesting breakers, then the adapter's variables,
 * the workspace's `env`, and last the run's own variables, which nothing can override.
 */
export function buildRunEnv(input: RunEnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  const layers = [input.base, input.adapterEnv ?? {}, input.workspaceEnv ?? {}];
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer)) {
      if (value === undefined || STRIPPED.test(key)) continue;
      if (input.adminToken !== undefined && value.includes(input.adminToken)) continue;
      env[key] = value;
    }
  }
  return { ...env, ...input.run };
}
