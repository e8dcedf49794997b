/**
 * @module The secrets the service holds, read once at start-up: what no run may see (its own
 * tokens, the webhooks', the triggers', the publish tokens) and the operator's named secrets, which
 * reach only the runs that name them (runs/run-secrets.ts; docs/security.md: Per-run secrets).
 */
import { SECRET_MIN } from '../contract/requests';
import type { HeldSecrets } from './runs/env';
import { type TriggerDefinition, triggerSecrets } from './triggers/trigger-spec';
import { type SecretSource, readSecret } from './util/secret-source';
import type { Workspaces } from './workspaces';
import { publishSecrets } from './worktrees/publish-settings';

/** What of the handler's options names a secret. */
interface SecretOptions {
  adminToken?: string;
  webhooks?: { secret?: string };
  triggers?: TriggerDefinition[];
  secrets?: Record<string, SecretSource>;
}

/** What the service holds that no run may see: the admin token, the webhooks' secrets, the triggers', the publish tokens (docs/security.md: What runs get). */
export function heldSecrets(options: SecretOptions, env: NodeJS.ProcessEnv, workspaces: Workspaces, named: ReadonlyMap<string, string>): HeldSecrets {
  const triggers = triggerSecrets(options.triggers ?? [], env);
  const publish = publishSecrets(workspaces.all() ?? [], env);
  const webhooks = [options.webhooks?.secret, ...(workspaces.all() ?? []).map((ws) => ws.webhook?.secret)];
  const values = [options.adminToken, ...webhooks, ...triggers.values, ...publish.values].filter((v): v is string => typeof v === 'string' && v !== '');
  // A `whsec_` secret's key is the part after the prefix: a copy of that alone signs as well.
  const keys = values.filter((v) => v.startsWith('whsec_')).map((v) => v.slice('whsec_'.length));
  // The operator's named secrets reach only the runs that name them (runs/run-secrets.ts), never the others through the environment.
  const fromEnv = Object.values(options.secrets ?? {}).flatMap((source) => (typeof source === 'object' && 'env' in source ? [source.env] : []));
  return { names: [...triggers.names, ...publish.names, ...fromEnv], values: [...values, ...keys, ...named.values()] };
}

/** The operator's named secrets, read once; one that cannot be read stops the start-up, naming it. */
export function namedSecrets(options: SecretOptions, env: NodeJS.ProcessEnv): Map<string, string> {
  const named = new Map<string, string>();
  for (const [name, source] of Object.entries(options.secrets ?? {})) {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(name)) throw new Error(`secrets: "${name}" is not a name (letters, digits, _ . -)`);
    const value = readSecret(source, `secrets["${name}"]`, env);
    if (value.length < SECRET_MIN)
      throw new Error(`secrets["${name}"] is shorter than ${SECRET_MIN} characters: it would be redacted wherever those characters appear`);
    named.set(name, value);
  }
  return named;
}
