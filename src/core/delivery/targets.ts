import { Webhook } from 'standardwebhooks';
import { Refusal } from '../../contract/problems';
import type { WebhookEvent } from '../../contract/records';
import type { ReplyAddress, WebhookTarget, Workspace } from '../types';
import { checkWebhookUrl } from './transport';

/** The installation's webhook settings (docs/webhooks.md). */
export interface WebhookOptions {
  /** Signs every delivery without a workspace secret of its own: `whsec_` + base64 (24 to 64 bytes). */
  secret?: string;
  /** Start requests may name a webhook URL (`webhook: {url}`). @default false */
  allowPerStartUrls?: boolean;
  /** Loopback, link-local and private targets are allowed. @default false */
  allowPrivateTargets?: boolean;
  /** Waits after each failed attempt; then it is given up. @default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h */
  retryDelaysMs?: number[];
  /** One attempt, answer included. @default 10000 */
  timeoutMs?: number;
  /** Deliveries in flight at once to one target (scheme, host and port); other targets have their own. @default 4 */
  concurrency?: number;
}

/** Refuses a secret the Standard Webhooks library cannot use. */
export function checkSecret(secret: string, where: string): void {
  let ok = secret.startsWith('whsec_');
  if (ok) {
    try {
      const bytes = Buffer.from(secret.slice(6), 'base64');
      ok = bytes.length >= 24 && bytes.length <= 64;
      new Webhook(secret);
    } catch {
      ok = false;
    }
  }
  if (!ok) throw new Error(`${where} must be "whsec_" followed by 24 to 64 bytes in base64`);
}

/** Checks a workspace's webhook; listed workspaces are checked when the handler is made. */
export function checkWorkspace(o: WebhookOptions, workspace: Workspace): void {
  const hook = workspace.webhook;
  if (!hook) return;
  const where = `workspace "${workspace.id}" webhook`;
  try {
    checkWebhookUrl(hook.url, o.allowPrivateTargets === true);
  } catch (error) {
    throw new Error(`${where} URL ${hook.url}: ${(error as Error).message}`);
  }
  if (hook.secret !== undefined) checkSecret(hook.secret, `${where} secret`);
  else if (o.secret === undefined) throw new Error(`${where} needs a secret: set its "secret" or the installation's webhooks.secret`);
}

/** The targets of a new run: its workspace's, the start request's if the installation allows them, and its trigger's reply. */
export function targetsFor(
  o: WebhookOptions,
  workspace: Workspace,
  requested?: { url: string; events?: WebhookEvent[] },
  reply?: { url: string; address: ReplyAddress },
): WebhookTarget[] {
  const targets: WebhookTarget[] = [];
  if (workspace.webhook) {
    checkWorkspace(o, workspace);
    targets.push({ url: workspace.webhook.url, events: workspace.webhook.events ?? ['run.ended'], source: 'workspace' });
  }
  if (requested) {
    if (!o.allowPerStartUrls) throw new Refusal('webhook_not_allowed', 'This installation does not take webhook URLs in start requests.');
    if (o.secret === undefined) throw new Refusal('webhook_not_allowed', 'This installation has no webhook signing secret.');
    let url: URL;
    try {
      url = checkWebhookUrl(requested.url, o.allowPrivateTargets === true);
    } catch (error) {
      throw new Refusal('invalid_webhook', `Field "webhook.url" is refused: ${(error as Error).message}.`);
    }
    // The parsed form is kept, never the raw string (which could carry a line break into a log).
    targets.push({ url: url.href, events: [...new Set<WebhookEvent>(requested.events ?? ['run.ended'])], source: 'start' });
  }
  if (reply) targets.push({ url: reply.url, events: ['run.ended'], source: 'reply', reply: reply.address });
  return targets;
}
