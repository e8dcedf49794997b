import { Webhook } from 'standardwebhooks';
import { HttpProblem } from '../../contract/problems';
import { type IndexEntry, type SortedIndex, createSortedIndex } from '../store/sorted-index';
import type { HeadlessStore } from '../store/keyv-store';
import type { WebhookDeliveryView, WebhookEvent } from '../../contract/records';
import type { StoredRun, WebhookTarget, Workspace } from '../types';
import { RefusedTarget, checkWebhookUrl, postWebhook } from './transport';

/**
 * Completion webhooks (README: Webhooks): an outbox in the store, one entry per run, target and
 * event, delivered at least once, signed per Standard Webhooks, retried with backoff for more
 * than a day, and given up visibly. The store is the truth; timers only say when to look again.
 */




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
  /** Deliveries in flight at once. @default 8 */
  concurrency?: number;
}



interface Delivery {
  id: string;
  /** The instance that delivers it: the one that queued it, or took it over from a gone one. */
  owner: string;
  /** Its target's place in the run's targets. */
  index: number;
  taskId: string;
  workspaceId: string;
  url: string;
  event: WebhookEvent;
  source: WebhookTarget['source'];
  /** The exact body, so every attempt (and its signature) carries the same bytes. */
  payload: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  nextAttemptAt: number | null;
  lastStatus?: number;
  lastError?: string;
  deliveredAt?: string;
}

const DEFAULT_DELAYS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
const deliveryKey = (taskId: string, index: number, event: WebhookEvent) => `webhook:${taskId}:${index}:${event}`;
/** A delivery's key; one stored before deliveries had an owner and index has its index in its id. */
const keyOf = (d: Delivery) => deliveryKey(d.taskId, d.index ?? Number(/_(\d+)_[a-z_]+$/.exec(d.id)?.[1]), d.event);
/** Listed by owner and state, so an instance finds the pending deliveries without reading the rest. */
const indexEntry = (d: Delivery): IndexEntry<Delivery['state']> => ({ group: d.owner ?? '', id: keyOf(d), bucket: d.state });
const ERROR_MAX = 300;

/** Refuses a secret the Standard Webhooks library cannot use. */
function checkSecret(secret: string, where: string): void {
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

export interface WebhooksOptions extends WebhookOptions {
  store: HeadlessStore;
  /** This instance: the owner of the deliveries it queues. */
  instanceId: string;
  log: (message: string, error?: unknown) => void;
  /** The workspace of a delivery, for its secret; undefined if it is gone. */
  workspace(id: string): Promise<Workspace | undefined>;
}

export class Webhooks {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private active = 0;
  private readonly closing = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly delays: number[];
  private readonly index: SortedIndex<Delivery['state']>;

  constructor(private readonly o: WebhooksOptions) {
    if (o.secret !== undefined) checkSecret(o.secret, 'webhooks.secret');
    this.delays = o.retryDelaysMs ?? DEFAULT_DELAYS;
    this.index = createSortedIndex(o.store, { table: 'headless_webhooks', prefix: 'webhook:', entry: indexEntry });
  }

  /** Checks a workspace's webhook; listed workspaces are checked when the handler is made. */
  checkWorkspace(workspace: Workspace): void {
    const hook = workspace.webhook;
    if (!hook) return;
    const where = `workspace "${workspace.id}" webhook`;
    try {
      checkWebhookUrl(hook.url, this.o.allowPrivateTargets === true);
    } catch (error) {
      throw new Error(`${where} URL ${hook.url}: ${(error as Error).message}`);
    }
    if (hook.secret !== undefined) checkSecret(hook.secret, `${where} secret`);
    else if (this.o.secret === undefined) throw new Error(`${where} needs a secret: set its "secret" or the installation's webhooks.secret`);
  }

  /** The targets of a new run: its workspace's, and the start request's if the installation allows them. */
  targetsFor(workspace: Workspace, requested?: { url: string; events?: WebhookEvent[] }): WebhookTarget[] {
    const targets: WebhookTarget[] = [];
    if (workspace.webhook) {
      this.checkWorkspace(workspace);
      targets.push({ url: workspace.webhook.url, events: workspace.webhook.events ?? ['run.ended'], source: 'workspace' });
    }
    if (requested) {
      if (!this.o.allowPerStartUrls) throw new HttpProblem('webhook_not_allowed', 'This installation does not take webhook URLs in start requests.');
      if (this.o.secret === undefined) throw new HttpProblem('webhook_not_allowed', 'This installation has no webhook signing secret.');
      try {
        checkWebhookUrl(requested.url, this.o.allowPrivateTargets === true);
      } catch (error) {
        throw new HttpProblem('invalid_webhook', `Field "webhook.url" is refused: ${(error as Error).message}.`);
      }
      targets.push({ url: requested.url, events: [...new Set<WebhookEvent>(requested.events ?? ['run.ended'])], source: 'start' });
    }
    return targets;
  }

  /**
   * Puts a run's deliveries for `event` in the outbox (once: an entry already there is kept),
   * then schedules them. Resolves when they are durable.
   */
  async enqueue(run: StoredRun, event: WebhookEvent, data: unknown): Promise<void> {
    const targets = run.webhookTargets ?? [];
    const timestamp = new Date().toISOString();
    const payload = JSON.stringify({ type: event, timestamp, data });
    for (const [index, target] of targets.entries()) {
      if (!target.events.includes(event)) continue;
      const key = deliveryKey(run.taskId, index, event);
      if (await this.o.store.get(key)) continue;
      const delivery: Delivery = {
        id: `msg_${run.taskId}_${index}_${event.replace('.', '_')}`,
        owner: this.o.instanceId,
        index,
        taskId: run.taskId,
        workspaceId: run.workspaceId,
        url: target.url,
        event,
        source: target.source,
        payload,
        state: 'pending',
        attempts: 0,
        nextAttemptAt: Date.now(),
      };
      await this.o.store.set(key, delivery);
      await this.index.add(indexEntry(delivery));
      this.schedule(key, 0);
    }
  }

  /** The deliveries of a run, one per target and event, as its record shows them. */
  async view(run: StoredRun): Promise<WebhookDeliveryView[]> {
    const pairs = (run.webhookTargets ?? []).flatMap((target, index) => target.events.map((event) => ({ target, index, event })));
    const stored = await this.o.store.getMany<Delivery>(pairs.map((p) => deliveryKey(run.taskId, p.index, p.event)));
    return pairs.map(({ target, event }, i) => {
      const d = stored[i];
      if (!d) return { id: null, url: target.url, event, state: 'waiting', attempts: 0, nextAttemptAt: null };
      return {
        id: d.id,
        url: d.url,
        event,
        state: d.state,
        attempts: d.attempts,
        nextAttemptAt: d.state === 'pending' && d.nextAttemptAt !== null ? new Date(d.nextAttemptAt).toISOString() : null,
        ...(d.lastStatus === undefined ? {} : { lastStatus: d.lastStatus }),
        ...(d.lastError === undefined ? {} : { lastError: d.lastError }),
        ...(d.deliveredAt === undefined ? {} : { deliveredAt: d.deliveredAt }),
      };
    });
  }

  /** Deletes a run's deliveries from the outbox. */
  async forget(run: StoredRun): Promise<void> {
    for (const [index, target] of (run.webhookTargets ?? []).entries()) {
      for (const event of target.events) {
        const key = deliveryKey(run.taskId, index, event);
        const d = await this.o.store.get<Delivery>(key);
        if (!d) continue;
        await this.o.store.delete(key);
        await this.index.delete(indexEntry(d));
      }
    }
  }

  /** Prepares the list of deliveries by owner and state. Start-up only. */
  load(): Promise<void> {
    return this.index.load();
  }

  /** Takes the pending deliveries of gone instances (at start-up: those an earlier boot left) and schedules them. */
  async takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> {
    for (const entry of await this.index.inBucket('pending')) {
      if (entry.group === this.o.instanceId || !(await isGone(entry.group || undefined))) continue;
      const d = await this.o.store.get<Delivery>(entry.id);
      if (!d || d.state !== 'pending') continue;
      const mine: Delivery = { ...d, owner: this.o.instanceId };
      await this.o.store.set(entry.id, mine);
      await this.index.delete(entry);
      await this.index.add(indexEntry(mine));
      this.schedule(entry.id, Math.max(0, (d.nextAttemptAt ?? 0) - Date.now()));
    }
  }

  private schedule(key: string, delayMs: number): void {
    if (this.closing.signal.aborted || this.timers.has(key) || this.queued.has(key)) return;
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.queued.add(key);
      this.queue.push(key);
      this.pump();
    }, delayMs);
    timer.unref();
    this.timers.set(key, timer);
  }

  /** Starts queued attempts up to the concurrency limit, so a hanging receiver holds one slot at most. */
  private pump(): void {
    while (this.active < (this.o.concurrency ?? 8) && this.queue.length > 0 && !this.closing.signal.aborted) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.active++;
      const attempt = this.attempt(key)
        .catch((error: unknown) => this.o.log(`webhook delivery ${key} failed unexpectedly`, error))
        .finally(() => {
          this.active--;
          this.inFlight.delete(attempt);
          this.pump();
        });
      this.inFlight.add(attempt);
    }
  }

  private async attempt(key: string): Promise<void> {
    const d = await this.o.store.get<Delivery>(key);
    // Another instance took it over (this one's lease ran out): it delivers it.
    if (!d || d.state !== 'pending' || d.owner !== this.o.instanceId) return;
    const secret = d.source === 'workspace' ? ((await this.o.workspace(d.workspaceId))?.webhook?.secret ?? this.o.secret) : this.o.secret;
    let status: number | undefined;
    let error: string | undefined;
    let permanent = false;
    if (secret === undefined) {
      error = 'no signing secret is configured';
      permanent = true;
    } else {
      const now = new Date();
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'headless-run-webhook',
        'webhook-id': d.id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': new Webhook(secret).sign(d.id, now, d.payload),
      };
      try {
        const url = checkWebhookUrl(d.url, this.o.allowPrivateTargets === true);
        const answer = await postWebhook(url, headers, d.payload, {
          allowPrivate: this.o.allowPrivateTargets === true,
          timeoutMs: this.o.timeoutMs ?? 10_000,
          signal: this.closing.signal,
        });
        status = answer.status;
        if (status < 200 || status > 299) {
          error = status >= 300 && status < 400 ? `answered ${status}: redirects are not followed` : `answered ${status}${answer.answer ? `: ${answer.answer}` : ''}`;
        }
      } catch (e) {
        // Closing: the attempt does not count; the next boot makes it again.
        if (this.closing.signal.aborted) return;
        error = e instanceof Error ? e.message : String(e);
        permanent = e instanceof RefusedTarget || (e as { code?: string }).code === 'ERR_WEBHOOK_TARGET_REFUSED';
      }
    }
    const attempts = d.attempts + 1;
    const delay = this.delays[attempts - 1];
    const next: Delivery = { ...d, attempts, ...(status === undefined ? {} : { lastStatus: status }) };
    if (error === undefined) {
      Object.assign(next, { state: 'delivered', nextAttemptAt: null, deliveredAt: new Date().toISOString() });
      delete next.lastError;
    } else if (permanent || delay === undefined) {
      Object.assign(next, { state: 'failed', nextAttemptAt: null, lastError: error.slice(0, ERROR_MAX) });
      this.o.log(`gave up the webhook ${d.id} to ${d.url} after ${attempts} attempt(s): ${error}`);
    } else {
      // Jitter only lengthens a wait, so the schedule never ends before its sum.
      const wait = Math.round(delay * (1 + Math.random() * 0.2));
      Object.assign(next, { nextAttemptAt: Date.now() + wait, lastError: error.slice(0, ERROR_MAX) });
    }
    await this.o.store.set(key, next);
    if (next.state === 'pending') this.schedule(key, next.nextAttemptAt! - Date.now());
    else await this.index.move(indexEntry(next), 'pending');
  }

  /** Stops scheduling and aborts attempts in flight; what is pending stays in the outbox for the next boot. */
  async close(): Promise<void> {
    this.closing.abort();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.all([...this.inFlight]);
  }
}
