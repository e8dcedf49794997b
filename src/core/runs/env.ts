import { delimiter } from 'node:path';

/** The environment of a run (docs/http-api.md: Start a run, The Inbox). */

/**
 * The service's own secrets: the ONE list of what no run ever sees, whoever set them (the daemon,
 * or a library user's `process.env`), and where systemd hands them over (`CREDENTIALS_DIRECTORY`).
 */
export const SERVICE_SECRETS = [
  'HEADLESS_ADMIN_TOKEN',
  'HEADLESS_ADMIN_TOKEN_FILE',
  'HEADLESS_WEBHOOK_SECRET',
  'HEADLESS_STORE_URL',
  'CREDENTIALS_DIRECTORY',
] as const;

/**
 * Removed from every layer: the service's secrets, what tells Claude Code it runs inside another
 * Claude Code session (`CLAUDECODE` and the `CLAUDE_CODE_*` session variables), code injection
 * into Node-based CLIs, and the service's own run variables.
 */
const STRIPPED = new RegExp(
  `^(${SERVICE_SECRETS.join('|')}|CLAUDECODE|CLAUDE_CODE_.*|NODE_OPTIONS|TRACEPARENT|TRACESTATE|HEADLESS_(API_URL|WORKSPACE_ID|TASK_ID|RESUME_ID|RUN_TOKEN))$`,
);

/** The `CLAUDE_CODE_*` variables that configure credentials, providers and limits: kept. */
const CLAUDE_SETTINGS =
  /^CLAUDE_CODE_(OAUTH_TOKEN|OAUTH_REFRESH_TOKEN|OAUTH_SCOPES|USE_[A-Z_]+|SKIP_[A-Z_]+_AUTH|DISABLE_[A-Z_]+|MAX_[A-Z_]+|SUBAGENT_MODEL|API_KEY_HELPER_TTL_MS|CLIENT_(CERT|KEY|KEY_PASSPHRASE)|EXTRA_BODY)$/;

export interface RunVariables {
  HEADLESS_API_URL: string;
  HEADLESS_WORKSPACE_ID: string;
  HEADLESS_TASK_ID: string;
  HEADLESS_RESUME_ID: string;
  HEADLESS_RUN_TOKEN: string;
  /** The run's span (W3C), where traces are on: an agent that traces joins the run's trace. */
  TRACEPARENT?: string;
}

/** The variables a run knows itself and the service by (docs/http-api.md: The Inbox). */
export const runVariables = (o: {
  apiUrl: string;
  workspaceId: string;
  taskId: string;
  resumeId: string;
  token: string;
  traceparent?: string;
}): RunVariables => ({
  HEADLESS_API_URL: o.apiUrl,
  HEADLESS_WORKSPACE_ID: o.workspaceId,
  HEADLESS_TASK_ID: o.taskId,
  HEADLESS_RESUME_ID: o.resumeId,
  HEADLESS_RUN_TOKEN: o.token,
  ...(o.traceparent === undefined ? {} : { TRACEPARENT: o.traceparent }),
});

/**
 * Secrets the service holds besides its own variables (the admin token, webhook and trigger
 * secrets): no run sees them, by the name the config reads them from or by value under any name.
 */
export interface HeldSecrets {
  names: string[];
  values: string[];
}

/** Shorter values are removed only where a variable is exactly them: as a substring they would take innocent variables along. */
const SUBSTRING_MIN = 8;

const holdsSecret = (value: string, held: HeldSecrets | undefined): boolean =>
  held?.values.some((secret) => value === secret || (secret.length >= SUBSTRING_MIN && value.includes(secret))) === true;

export interface RunEnvInput {
  base: NodeJS.ProcessEnv;
  /** Removed wherever they appear. */
  secrets?: HeldSecrets;
  adapterEnv?: Record<string, string>;
  workspaceEnv?: Record<string, string>;
  /** The run's own secrets (runs/run-secrets.ts): set after what is stripped, so a held value a run was given by name reaches it. */
  given?: Record<string, string>;
  /** The run's working directory, also given as `PWD`: some CLIs (opencode) work where `PWD` says. */
  cwd: string;
  /** Put first on the run's `PATH` (where `headless-inbox` is). */
  binDir?: string;
  run: RunVariables;
}

const stripped = (name: string) => STRIPPED.test(name) && !CLAUDE_SETTINGS.test(name);

/**
 * The service's environment minus secrets and nesting breakers, then the adapter's variables,
 * the workspace's `env`, and last `PWD` and the run's own variables, which nothing can override.
 */
export function buildRunEnv(input: RunEnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  const layers = [input.base, input.adapterEnv ?? {}, input.workspaceEnv ?? {}];
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer)) {
      if (value === undefined || stripped(key) || input.secrets?.names.includes(key) || holdsSecret(value, input.secrets)) continue;
      env[key] = value;
    }
  }
  if (input.binDir) env.PATH = env.PATH ? `${input.binDir}${delimiter}${env.PATH}` : input.binDir;
  return { ...env, ...input.given, PWD: input.cwd, ...input.run };
}
