import { RUN_SPEC_KEYS, type RunSpec } from '../../contract/run-spec';
import { checkDailyLimits } from '../runs/daily-limits';
import { checkSpecLayer, refuseMovedKeys } from '../runs/run-spec';
import type { DailyLimits } from '../types';
import { type LoadedReply, type ReplySettings, loadReply, replySources } from './reply-spec';
import { type SecretSource, readSecret } from '../util/secret-source';
import { type SenderName, SENDER_NAMES, type Sender, senderOf } from './senders';
import { type PromptTemplate, parseTemplate, templateVariables } from './template';
import { VERIFY_METHODS, type VerifySettings } from './verification';
import { type When, checkWhen } from './when';

export type { SecretSource } from '../util/secret-source';

/** What becomes of a delivery that says its incident is over. */
export type OnResolved = 'cancel' | 'annotate' | 'run' | 'ignore';

/** A trigger (docs/triggers.md): a sender's webhook that starts a run. */
export interface TriggerDefinition {
  /** Its URL: `POST /api/triggers/<name>`; its runs carry it as `source.name`. */
  name: string;
  workspace: string;
  /** Whose payloads it takes: how they are signed, read, deduplicated. */
  sender: SenderName;
  /** Required for `generic`; else over the sender's own scheme (Alertmanager: `bearer`). */
  verify?: VerifySettings;
  secret: SecretSource;
  /** A Liquid template over `payload`, `headers`, `event`, `status`, `deliveryId`, `trigger`. */
  prompt: string;
  /**
   * Its runs' spec, over the workspace's `run` (docs/configuration.md: The run spec); its `title`
   * is a template, as `prompt` is.
   */
  run?: RunSpec;
  /** Every entry must match: a path (`status`, `event`, `payload.commonLabels.severity`, `payload.issue.labels[].name`) and the value, or values, it may have. */
  when?: When;
  /** A delivery whose key was seen within the window starts nothing. @default the sender's key, 72 h */
  dedupe?: { key?: string; windowSeconds?: number };
  /** @default "annotate" */
  resolved?: OnResolved;
  /**
   * `perMinute`: deliveries taken per minute (more are `429`); `concurrent`: its runs at once (more
   * wait in the queue; default half the run slots); `queued`: its runs waiting at most (more are
   * `503 trigger_busy`; default a quarter of the queue); `runsPerDay`, `spendPerDayUsd`: its runs and
   * spend per UTC day (more are `429 daily_limit_reached`).
   */
  limits?: { perMinute?: number; concurrent?: number; queued?: number } & DailyLimits;
  /** Slack, Linear: a reply where the delivery came from when its run ends (docs/triggers.md: Replies). */
  reply?: ReplySettings;
  /** @default true */
  enabled?: boolean;
}

/** A trigger ready to take deliveries. */
export interface Trigger {
  definition: TriggerDefinition;
  sender: Sender;
  verify: VerifySettings;
  secret: string;
  prompt: PromptTemplate;
  title?: PromptTemplate;
  dedupeKey?: PromptTemplate;
  windowMs: number;
  reply?: LoadedReply;
  /** Fields its templates read that the sender's example payload does not have: checked at each delivery only. */
  warnings: string[];
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
/** What a template may read. */
export const CONTEXT_NAMES = ['payload', 'headers', 'event', 'status', 'deliveryId', 'trigger', 'slack', 'linear'];
const ON_RESOLVED: OnResolved[] = ['cancel', 'annotate', 'run', 'ignore'];
const DEFAULT_WINDOW_S = 72 * 3600;

/** The triggers' secrets, for runs never to see: by value, and by the variable they are read from. A secret that cannot be read is the loader's to report. */
export function triggerSecrets(definitions: TriggerDefinition[], env: NodeJS.ProcessEnv): { names: string[]; values: string[] } {
  const names: string[] = [];
  const values: string[] = [];
  for (const source of definitions.flatMap((d) => [d.secret, ...replySources(d.reply)])) {
    if (typeof source === 'object' && source !== null && 'env' in source) names.push(source.env);
    try {
      values.push(readSecret(source, 'secret', env));
    } catch {
      // loadTriggers refuses it, naming it.
    }
  }
  return { names, values };
}

/** A template's variables: each must be one the context has; payload fields missing from the example are warnings. */
function templateOf(source: string, where: string, example: Record<string, unknown> | undefined, warnings: string[]): PromptTemplate {
  let template: PromptTemplate;
  try {
    template = parseTemplate(source);
  } catch (error) {
    throw new Error(`${where}: ${(error as Error).message}`);
  }
  for (const segments of templateVariables(template)) {
    const [first, ...rest] = segments;
    if (!CONTEXT_NAMES.includes(String(first)))
      throw new Error(`${where}: unknown variable ${segments.join('.')} (a template reads ${CONTEXT_NAMES.join(', ')})`);
    if (first === 'payload' && example && !hasPath(example, rest))
      warnings.push(`${where} reads payload.${rest.join('.')}, which the sender's example payload does not have`);
  }
  return template;
}

function hasPath(value: unknown, path: Array<string | number | unknown>): boolean {
  let current = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return false;
    const next = (current as Record<string, unknown>)[String(key)];
    if (next === undefined) return Array.isArray(current) && Number.isInteger(Number(key)) && current.length > 0;
    current = next;
  }
  return true;
}

function verifyOf(d: TriggerDefinition, sender: Sender, where: string): VerifySettings {
  const verify = d.verify ?? sender.verify;
  if (!verify) throw new Error(`${where}.verify is required for a generic sender: ${VERIFY_METHODS.join(', ')}`);
  if (!VERIFY_METHODS.includes(verify.method)) throw new Error(`${where}.verify.method must be one of ${VERIFY_METHODS.join(', ')}`);
  if (verify.method === 'hmac' && !verify.header) throw new Error(`${where}.verify.header is required for hmac`);
  if (verify.method === 'basic' && !verify.username) throw new Error(`${where}.verify.username is required for basic`);
  return verify;
}

function checkNumbers(d: TriggerDefinition, where: string): void {
  const positive = {
    'dedupe.windowSeconds': d.dedupe?.windowSeconds,
    'limits.perMinute': d.limits?.perMinute,
    'limits.concurrent': d.limits?.concurrent,
    'limits.queued': d.limits?.queued,
  };
  checkDailyLimits(d.limits, `${where}: limits`);
  for (const [name, value] of Object.entries(positive)) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1)) throw new Error(`${where}.${name} must be a whole number of at least 1`);
  }
  if (d.resolved !== undefined && !ON_RESOLVED.includes(d.resolved)) throw new Error(`${where}.resolved must be one of ${ON_RESOLVED.join(', ')}`);
}

/** Loads one trigger; throws, naming where, on anything that cannot work. */
function loadTrigger(d: TriggerDefinition, where: string, env: NodeJS.ProcessEnv): Trigger {
  if (!NAME.test(d.name ?? '')) throw new Error(`${where}.name must match ${NAME.source}`);
  if (!SENDER_NAMES.includes(d.sender)) throw new Error(`${where}.sender must be one of ${SENDER_NAMES.join(', ')}`);
  const sender = senderOf(d.sender);
  const verify = verifyOf(d, sender, where);
  checkNumbers(d, where);
  // A trigger's own `verify` is how its deliveries are verified; its runs' checks are `run.verify`.
  refuseMovedKeys(
    d,
    where,
    RUN_SPEC_KEYS.filter((key) => key !== 'verify'),
  );
  checkSpecLayer(d.run, where, { agent: true });
  if (d.when !== undefined) checkWhen(d.when, `${where}.when`, CONTEXT_NAMES);
  const warnings: string[] = [];
  const example = sender.example;
  return {
    definition: d,
    sender,
    verify,
    secret: readSecret(d.secret, `${where}.secret`, env),
    ...(d.reply === undefined ? {} : { reply: loadReply(d.reply, d.sender, `${where}.reply`, env) }),
    prompt: templateOf(d.prompt ?? '', `${where}.prompt`, example, warnings),
    ...(d.run?.title === undefined ? {} : { title: templateOf(d.run.title, `${where}.run.title`, example, warnings) }),
    ...(d.dedupe?.key === undefined ? {} : { dedupeKey: templateOf(d.dedupe.key, `${where}.dedupe.key`, example, warnings) }),
    windowMs: (d.dedupe?.windowSeconds ?? DEFAULT_WINDOW_S) * 1000,
    warnings,
  };
}

/** Loads the triggers; throws on a duplicate name, an unknown workspace, or a trigger that cannot work. */
export function loadTriggers(
  definitions: TriggerDefinition[],
  hasWorkspace: (id: string) => boolean | undefined,
  env: NodeJS.ProcessEnv,
): Map<string, Trigger> {
  const triggers = new Map<string, Trigger>();
  definitions.forEach((d, i) => {
    const where = `triggers[${i}]`;
    if (triggers.has(d.name)) throw new Error(`${where}.name "${d.name}" is used twice`);
    if (hasWorkspace(d.workspace) === false) throw new Error(`${where}.workspace "${d.workspace}" is not a listed workspace`);
    if (!d.prompt) throw new Error(`${where}.prompt is required`);
    triggers.set(d.name, loadTrigger(d, where, env));
  });
  return triggers;
}
