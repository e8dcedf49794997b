import type { ScheduleDefinition } from '../core/schedules/schedule-spec';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import * as v from 'valibot';
import { BUILTIN_AGENTS } from '../core/agents/builtins';
import type { CommandAgentDefinition } from '../core/agents/command-agent';
import { ID_PATTERN } from '../contract/ids';
import type { TokenPrice } from '../core/agents/prices';
import { RUN_SPEC_KEYS, RunSpecSchema } from '../contract/run-spec';
import type { QueueSettings, Workspace } from '../core/types';
import { WEBHOOK_EVENTS } from '../contract/records';
import { nearest } from '../core/util/text';
import { NETWORK_TARGET } from '../core/sandbox/network';
import { SENDER_NAMES } from '../core/triggers/senders';
import type { TriggerDefinition } from '../core/triggers/trigger-spec';
import { VERIFY_METHODS } from '../core/triggers/verification';
import type { WebhookOptions } from '../core/delivery/targets';

/** The daemon's config file (docs/configuration.md). Unknown keys are errors that name the key. */

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const stringList = v.array(v.string());

/** Paths relative to HOME that stay inside it. */
const homePaths = v.array(v.pipe(v.string(), v.regex(/^(?!\/)(?!.*(^|\/)\.\.(\/|$)).+$/, 'must be a path relative to HOME, without ..')));

const AgentSchema = v.strictObject({
  command: v.pipe(v.string(), v.minLength(1)),
  args: stringList,
  resumeArgs: v.optional(stringList),
  stdin: v.optional(v.string()),
  sessionIdPattern: v.optional(
    v.pipe(
      v.string(),
      v.check((p) => {
        try {
          new RegExp(p);
          return true;
        } catch {
          return false;
        }
      }, 'is not a valid regular expression'),
    ),
  ),
  kind: v.optional(v.picklist(['agent', 'utility'])),
  state: v.optional(homePaths),
  config: v.optional(homePaths),
});

const webhookEvents = v.optional(v.pipe(v.array(v.picklist(WEBHOOK_EVENTS)), v.minLength(1)));

const positiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const DailyLimitsEntries = { runsPerDay: v.optional(positiveInt), spendPerDayUsd: v.optional(v.pipe(v.number(), v.gtValue(0))) };
/** A workspace's run defaults: the run spec but its agent (a workspace chooses by headlessAgent and defaultAgent). */
const WorkspaceRunSchema = v.omit(RunSpecSchema, ['agent']);
const QueueSchema = v.strictObject({ max: v.optional(positiveInt), ttlMs: v.optional(positiveInt) });

/** A secret: the value, an environment variable, or a file. */
const SecretSourceSchema = v.union([v.pipe(v.string(), v.minLength(1)), v.strictObject({ env: v.string() }), v.strictObject({ file: v.string() })]);

const WorkspaceSchema = v.strictObject({
  id: v.pipe(v.string(), v.regex(ID_PATTERN, `must match ${ID_PATTERN.source}`)),
  path: v.pipe(v.string(), v.minLength(1)),
  tag: v.optional(v.string()),
  agents: v.optional(stringList),
  headlessAgent: v.optional(v.string()),
  defaultAgent: v.optional(v.string()),
  env: v.optional(v.record(v.string(), v.string())),
  webhook: v.optional(v.strictObject({ url: v.string(), secret: v.optional(v.string()), events: webhookEvents })),
  queue: v.optional(v.union([QueueSchema, v.literal(false)])),
  network: v.optional(v.array(v.pipe(v.string(), v.regex(NETWORK_TARGET, 'must be host:port, or *')))),
  run: v.optional(WorkspaceRunSchema),
  limits: v.optional(v.strictObject(DailyLimitsEntries)),
  labels: v.optional(v.array(v.pipe(v.string(), v.regex(ID_PATTERN, `must match ${ID_PATTERN.source}`)))),
  worktree: v.optional(
    v.strictObject({
      setup: v.optional(v.pipe(v.string(), v.minLength(1))),
      setupTimeoutMs: v.optional(positiveInt),
      cleanup: v.optional(v.picklist(['if-unchanged', 'always', 'never'])),
    }),
  ),
  publishTo: v.optional(
    v.strictObject({
      remote: v.pipe(v.string(), v.minLength(1)),
      token: v.optional(SecretSourceSchema),
      username: v.optional(v.string()),
      forge: v.optional(v.strictObject({ kind: v.picklist(['github', 'gitlab']), repository: v.string(), apiUrl: v.optional(v.string()) })),
      fromStarts: v.optional(v.boolean()),
      statusUrl: v.optional(v.string()),
    }),
  ),
});

const WebhooksSchema = v.strictObject({
  secret: v.optional(v.string()),
  allowPerStartUrls: v.optional(v.boolean()),
  allowPrivateTargets: v.optional(v.boolean()),
  retryDelaysMs: v.optional(v.pipe(v.array(positiveInt), v.minLength(1))),
  timeoutMs: v.optional(positiveInt),
  concurrency: v.optional(positiveInt),
});

const ScheduleSchema = v.strictObject({
  name: v.string(),
  cron: v.string(),
  timezone: v.optional(v.string()),
  workspace: v.string(),
  prompt: v.pipe(v.string(), v.minLength(1)),
  run: v.optional(RunSpecSchema),
  overlap: v.optional(v.picklist(['skip', 'queue', 'allow'])),
  missed: v.optional(v.picklist(['skip', 'once'])),
  jitterMs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
  limits: v.optional(v.strictObject(DailyLimitsEntries)),
});

/** A trigger's verification: the method, and for `grafana`, `hmac` and `basic` their own settings. */
const VerifySchema = v.strictObject({
  method: v.picklist(VERIFY_METHODS),
  header: v.optional(v.string()),
  timestampHeader: v.optional(v.string()),
  toleranceSeconds: v.optional(positiveInt),
  algorithm: v.optional(v.picklist(['sha256', 'sha1', 'sha512'])),
  encoding: v.optional(v.picklist(['hex', 'base64'])),
  prefix: v.optional(v.string()),
  separator: v.optional(v.string()),
  username: v.optional(v.string()),
});

/** A Slack or Linear trigger's reply where the delivery came from (docs/triggers.md: Replies). */
const ReplySchema = v.strictObject({
  slack: v.optional(v.strictObject({ token: SecretSourceSchema, apiUrl: v.optional(v.string()) })),
  linear: v.optional(v.strictObject({ apiKey: SecretSourceSchema, apiUrl: v.optional(v.string()) })),
  publicUrl: v.optional(v.string()),
});

const TriggerSchema = v.strictObject({
  name: v.pipe(v.string(), v.regex(ID_PATTERN, `must match ${ID_PATTERN.source}`)),
  workspace: v.string(),
  sender: v.picklist(SENDER_NAMES),
  verify: v.optional(VerifySchema),
  secret: SecretSourceSchema,
  prompt: v.pipe(v.string(), v.minLength(1)),
  run: v.optional(RunSpecSchema),
  reply: v.optional(ReplySchema),
  when: v.optional(v.record(v.string(), v.union([v.string(), v.array(v.string())]))),
  dedupe: v.optional(v.strictObject({ key: v.optional(v.string()), windowSeconds: v.optional(positiveInt) })),
  resolved: v.optional(v.picklist(['cancel', 'annotate', 'run', 'ignore'])),
  limits: v.optional(
    v.strictObject({ perMinute: v.optional(positiveInt), concurrent: v.optional(positiveInt), queued: v.optional(positiveInt), ...DailyLimitsEntries }),
  ),
  enabled: v.optional(v.boolean()),
});

export const ConfigSchema = v.strictObject({
  /** The operator's named secrets, which a start may give its run by name (docs/security.md: Per-run secrets). */
  secrets: v.optional(
    v.record(
      v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'a name of letters, digits, _ . -')),
      v.union([v.strictObject({ env: v.string() }), v.strictObject({ file: v.string() })]),
    ),
  ),
  prices: v.optional(
    v.record(v.string(), v.strictObject({ inputPerMillionUsd: v.pipe(v.number(), v.minValue(0)), outputPerMillionUsd: v.pipe(v.number(), v.minValue(0)) })),
  ),
  maxConcurrentRuns: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  labels: v.optional(v.array(v.pipe(v.string(), v.regex(ID_PATTERN, `must match ${ID_PATTERN.source}`)))),
  stallTimeoutMs: v.optional(positiveInt),
  maxMemoryMb: v.optional(positiveInt),
  minFreeMemoryMb: v.optional(positiveInt),
  queue: v.optional(QueueSchema),
  schedules: v.optional(v.array(ScheduleSchema)),
  triggers: v.optional(v.array(TriggerSchema)),
  defaultAgent: v.optional(v.string()),
  publicHosts: v.optional(stringList),
  localCallers: v.optional(v.picklist(['trusted', 'token'])),
  inheritEnv: v.optional(v.union([v.literal('all'), v.array(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/, 'must be NAME or PREFIX_*')))])),
  agents: v.optional(v.record(v.pipe(v.string(), v.regex(NAME, `must match ${NAME.source}`)), AgentSchema)),
  // Empty: a fleet's API daemon that runs no workspace itself (refused alone: core/resources.ts).
  workspaces: v.optional(v.array(WorkspaceSchema)),
  webhooks: v.optional(WebhooksSchema),
  retentionDays: v.optional(v.pipe(v.number(), v.minValue(0))),
  instanceLeaseSeconds: v.optional(v.pipe(v.number(), v.minValue(1))),
  sandbox: v.optional(
    v.strictObject({
      readable: v.optional(v.array(v.pipe(v.string(), v.startsWith('/', 'must be an absolute path')))),
      user: v.optional(
        v.pipe(
          v.string(),
          v.regex(/^[1-9]\d{0,9}:[1-9]\d{0,9}$/, 'must be "uid:gid", neither of them 0'),
          v.transform((text) => {
            const [uid, gid] = text.split(':').map(Number);
            return { uid: uid ?? 0, gid: gid ?? 0 };
          }),
        ),
      ),
    }),
  ),
});

export interface DaemonConfig {
  /** The file it was read from, if any: sandboxed runs never see it. */
  file?: string;
  maxConcurrentRuns?: number;
  /** This daemon's labels: in a fleet it runs the workspaces whose labels it has. */
  labels?: string[];
  stallTimeoutMs?: number;
  maxMemoryMb?: number;
  minFreeMemoryMb?: number;
  queue?: QueueSettings;
  schedules?: ScheduleDefinition[];
  triggers?: TriggerDefinition[];
  defaultAgent?: string;
  publicHosts?: string[];
  localCallers?: 'trusted' | 'token';
  /** What runs inherit of the daemon's environment. */
  inheritEnv?: 'all' | string[];
  agents: Record<string, CommandAgentDefinition>;
  workspaces: Workspace[];
  webhooks?: WebhookOptions;
  retentionDays?: number;
  /** With a shared PostgreSQL store: how long an instance's lease lasts. */
  instanceLeaseMs?: number;
  /** What every sandbox may read besides the system, its PATH and its agent's install; under a root daemon, who its agents run as. */
  sandbox?: { readable?: string[]; user?: { uid: number; gid: number } };
  /** Token prices by agent, for agents that report no cost. */
  prices?: Record<string, TokenPrice>;
  /** The operator's named secrets: where each is read from (never written in the file itself). */
  secrets?: Record<string, { env: string } | { file: string }>;
}

export class ConfigError extends Error {}

const pathOf = (issue: v.BaseIssue<unknown>) =>
  (issue.path ?? [])
    .map((p) => (typeof p.key === 'number' ? `[${p.key}]` : `.${String(p.key)}`))
    .join('')
    .replace(/^\./, '');

/** An unknown key (a strict object's issue expecting nothing there) or a missing one (it received nothing). */
/** The keys of a run's `verify`, which a trigger's own `verify` (its sender's signature) does not take. */
const RUN_VERIFY_KEYS = ['checks', 'grader', 'maxAttempts', 'onExhausted'] as const;

const isUnknownKey = (issue: v.BaseIssue<unknown>) => issue.type === 'strict_object' && issue.expected === 'never';
const isMissingKey = (issue: v.BaseIssue<unknown>) => issue.received === 'undefined' && (issue.path?.length ?? 0) > 0;

/** The one issue to report: a misspelt key before the key it leaves missing, with what it was likely meant to be. */
function describe(issues: [v.BaseIssue<unknown>, ...v.BaseIssue<unknown>[]]): string {
  const unknown = issues.find(isUnknownKey);
  if (unknown) {
    const path = pathOf(unknown);
    const parent = path.replace(/(\.|^)[^.[\]]+$/, '');
    const lastKey = (issue: v.BaseIssue<unknown>) => String(issue.path?.at(-1)?.key);
    const missing = issues.filter((i) => isMissingKey(i) && pathOf(i).replace(/(\.|^)[^.[\]]+$/, '') === parent).map(lastKey);
    const key = lastKey(unknown);
    const moved = movedTo(key, parent, unknown);
    if (moved !== undefined) return `"${path}" has moved into the run spec: write it as "${moved}"`;
    // A trigger's own `verify` checks its sender's signature; a run's checks are the run spec's.
    if (/^triggers\[\d+\]\.verify$/.test(parent) && (RUN_VERIFY_KEYS as readonly string[]).includes(key)) {
      return `unknown key "${path}": a trigger's "verify" checks its sender's signature; a run's checks go in "${parent.replace(/verify$/, 'run.verify')}.${key}"`;
    }
    // The keys it was likely meant to be: the ones missing there first, then any that object takes.
    const known = [
      ...missing,
      ...keysAt(
        ConfigSchema,
        (unknown.path ?? []).slice(0, -1).map((p) => p.key),
      ),
    ];
    const guess = nearest(key, known);
    return `unknown key "${path}"${guess !== undefined ? ` (did you mean "${guess}"?)` : ''}`;
  }
  const issue = issues[0];
  if (isMissingKey(issue)) return `"${pathOf(issue)}" is required`;
  // The run spec's messages are the API's problem codes: say what was expected instead.
  const message = /^[a-z_]+$/.test(issue.message) ? `is invalid: expected ${issue.expected ?? 'another value'}` : issue.message;
  return `"${pathOf(issue) || '(root)'}" ${message}`;
}

/**
 * Where a key of the config's shape before the run spec went: a run spec key set beside `run`
 * (on a workspace, schedule or trigger), or a workspace's `worktree.ref`.
 */
function movedTo(key: string, parent: string, issue: v.BaseIssue<unknown>): string | undefined {
  const at = (issue.path ?? []).slice(0, -1).map((p) => p.key);
  const owner = parent.replace(/\.worktree$/, '');
  if (key === 'ref' && parent.endsWith('.worktree')) return `${owner}.run.ref`;
  if (!(RUN_SPEC_KEYS as readonly string[]).includes(key) || !keysAt(ConfigSchema, at).includes('run')) return undefined;
  return `${parent}.run.${key}`;
}

/** The keys of the object the config schema expects at `path`. */
function keysAt(schema: unknown, path: unknown[]): string[] {
  type Node = { entries?: Record<string, unknown>; wrapped?: unknown; value?: unknown; item?: unknown };
  let node = schema as Node | undefined;
  const unwrap = () => {
    while (node?.wrapped) node = node.wrapped as Node;
  };
  for (const key of path) {
    unwrap();
    node = (typeof key === 'string' && node?.entries ? node.entries[key] : (node?.value ?? node?.item)) as Node | undefined;
  }
  unwrap();
  return Object.keys(node?.entries ?? {});
}

/**
 * The config names commands the daemon runs as this user: a file someone else could have written
 * is refused (docs/security.md: The config file). It must be this user's or root's and writable by
 * no one else; one found in the current directory (no --config) must sit in a folder no one else
 * can write to either (a shared /tmp).
 */
function checkTrusted(path: string, found: boolean): void {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  const refuse = (why: string) => {
    throw new ConfigError(`not reading config ${path}: ${why}; its agents' commands would run as you`);
  };
  const stat = statSync(path);
  if (stat.uid !== uid && stat.uid !== 0) refuse(`it belongs to another user (uid ${stat.uid})`);
  if ((stat.mode & 0o022) !== 0) refuse(`others can write to it (chmod go-w ${path})`);
  if (found && (statSync(dirname(path)).mode & 0o022) !== 0) refuse('it was found in a folder others can write to (pass --config to name it)');
}

/** The default workspace: the current directory, every registered agent enabled. */
export function defaultWorkspace(cwd: string): Workspace {
  return { id: 'default', path: cwd };
}

/** Reads `file`, or `headless.config.json` in `cwd` if present, else the defaults. */
export function loadConfig(file: string | undefined, cwd: string): DaemonConfig {
  const path = file === undefined ? resolve(cwd, 'headless.config.json') : resolve(cwd, file);
  if (file === undefined && !existsSync(path)) return { agents: {}, workspaces: [defaultWorkspace(cwd)] };
  checkTrusted(path, file === undefined);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`cannot read config ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const result = v.safeParse(ConfigSchema, raw);
  if (!result.success) throw new ConfigError(`config ${path}: ${describe(result.issues)}`);
  const config = result.output;
  const base = dirname(path);
  const local = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  const agents: Record<string, CommandAgentDefinition> = {};
  for (const [name, agent] of Object.entries(config.agents ?? {})) {
    agents[name] = { ...agent, command: agent.command.includes('/') ? local(agent.command) : agent.command };
  }
  const known = new Set([...BUILTIN_AGENTS.map((a) => a.name), ...Object.keys(agents)]);
  for (const name of Object.keys(agents)) {
    if (BUILTIN_AGENTS.some((a) => a.name === name)) throw new ConfigError(`config ${path}: agent "${name}" is a built-in agent; pick another name`);
  }
  // A misspelt agent name would silently disable it: name it instead.
  const unknownAgent = (name: string | undefined, where: string) => {
    if (name !== undefined && !known.has(name)) throw new ConfigError(`config ${path}: ${where} names unknown agent "${name}"`);
  };
  unknownAgent(config.defaultAgent, '"defaultAgent"');
  // A publish remote that is no URL is a repository's path, from the config's folder as a workspace's is.
  const remoteOf = (remote: string) => (remote.includes('://') ? remote : local(remote));
  const workspaces = (config.workspaces ?? [defaultWorkspace(cwd)]).map((ws) => ({
    ...ws,
    path: local(ws.path),
    ...(ws.publishTo ? { publishTo: { ...ws.publishTo, remote: remoteOf(ws.publishTo.remote) } } : {}),
  }));
  for (const [i, ws] of workspaces.entries()) {
    for (const name of ws.agents ?? []) unknownAgent(name, `"workspaces[${i}].agents"`);
    unknownAgent(ws.headlessAgent, `"workspaces[${i}].headlessAgent"`);
    unknownAgent(ws.defaultAgent, `"workspaces[${i}].defaultAgent"`);
  }
  for (const ws of workspaces) {
    if (!existsSync(ws.path)) throw new ConfigError(`config ${path}: workspace "${ws.id}" path ${ws.path} does not exist`);
  }
  return {
    file: path,
    maxConcurrentRuns: config.maxConcurrentRuns,
    labels: config.labels,
    stallTimeoutMs: config.stallTimeoutMs,
    maxMemoryMb: config.maxMemoryMb,
    minFreeMemoryMb: config.minFreeMemoryMb,
    queue: config.queue,
    schedules: config.schedules,
    triggers: config.triggers as TriggerDefinition[] | undefined,
    defaultAgent: config.defaultAgent,
    publicHosts: config.publicHosts,
    localCallers: config.localCallers,
    inheritEnv: config.inheritEnv,
    agents,
    workspaces,
    webhooks: config.webhooks,
    retentionDays: config.retentionDays,
    sandbox: config.sandbox,
    prices: config.prices,
    secrets: config.secrets,
    ...(config.instanceLeaseSeconds === undefined ? {} : { instanceLeaseMs: Math.round(config.instanceLeaseSeconds * 1000) }),
  };
}
