import { hasEnded } from '../../contract/records';
import { Webhook } from 'standardwebhooks';
import type { ServiceObserver } from '../telemetry/observer';
import { StorageError } from '../../contract/problems';
import type { Delivery, StoredRun, WebhookTarget, Workspace } from '../types';
import { deliveryId, payloadOf, sameDelivery } from './outbox';
import { type ReplyContext, sendReply, shownUrl } from './replies';
import type { WebhookOptions } from './targets';
import { type PostOptions, RefusedTarget, checkWebhookUrl, postWebhook } from './transport';

/**
 * Delivers the outbox (docs/webhooks.md): at least once, signed per Standard Webhooks, retried
 * with backoff for more than a day, given up visibly. The run records are the truth; timers only
 * say when to look again. Each target (scheme, host and port) has its own lane with its own
 * concurrency, so a receiver that hangs never delays another's deliveries.
 */

/** What the dispatcher needs of the run records. */
export interface OutboxRecords {
  find(taskId: string): Promise<StoredRun | undefined>;
  /** The runs with a pending delivery. */
  withDueDeliveries(): Promise<StoredRun[]>;
  /** The `claimEnded` transition: this instance owns the ended run of the gone `gone` from now on. Resolves with the record as stored. */
  claimEnded(taskId: string, gone: string): Promise<StoredRun | undefined>;
  /** The `settleDelivery` transition: a delivery's state after an attempt, while this instance owns the run. Resolves with the record as stored. */
  settleDelivery(taskId: string, settled: Delivery): Promise<StoredRun | undefined>;
}

export interface DispatcherOptions extends WebhookOptions {
  records: OutboxRecords;
  /** This instance: it delivers the deliveries of the runs it owns. */
  instanceId: string;
  log: (message: string, error?: unknown) => void;
  /** Told each attempt's outcome (the metrics). */
  observe?: ServiceObserver;
  /** The workspace of a delivery, for its secret; undefined if it is gone. */
  workspace(id: string): Promise<Workspace | undefined>;
  /** A run's trigger's reply (docs/triggers.md: Replies): its credential and the run's link; undefined when it has none (any more). */
  replyOf?(run: StoredRun): ReplyContext | undefined;
}

/** An attempt's outcome. */
type Outcome = { status?: number; error?: string; permanent: boolean };

const DEFAULT_DELAYS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
const ERROR_MAX = 300;
/** After a store error an attempt is made again after this, doubling up to STORE_RETRY_MAX_MS. */
const STORE_RETRY_MS = 2_000;
const STORE_RETRY_MAX_MS = 60_000;

interface Job extends Pick<Delivery, 'target' | 'event' | 'subject'> {
  taskId: string;
  lane: string;
}

interface Lane {
  queue: Job[];
  active: number;
}

const jobKey = (j: Pick<Job, 'taskId' | 'target' | 'event' | 'subject'>) => `${j.taskId} ${j.target} ${j.event}${j.subject ? ` ${j.subject}` : ''}`;

export class WebhookDispatcher {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly queued = new Set<string>();
  private readonly lanes = new Map<string, Lane>();
  private readonly storeFailures = new Map<string, number>();
  private readonly closing = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly delays: number[];

  constructor(private readonly o: DispatcherOptions) {
    this.delays = o.retryDelaysMs ?? DEFAULT_DELAYS;
  }

  /** Schedules the pending deliveries of a stored record, if this instance owns it. */
  schedule(run: StoredRun): void {
    if (run.bootId !== this.o.instanceId) return;
    for (const d of run.deliveries ?? []) {
      const url = run.webhookTargets?.[d.target]?.url;
      if (d.state !== 'pending' || url === undefined) continue;
      const subject = d.subject === undefined ? {} : { subject: d.subject };
      this.after({ taskId: run.taskId, target: d.target, event: d.event, ...subject, lane: laneOf(url) }, (d.nextAttemptAt ?? 0) - Date.now());
    }
  }

  /** Takes the pending deliveries of ended runs whose owner is gone (at start-up, an earlier boot's), and schedules them. */
  async takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> {
    for (const run of await this.o.records.withDueDeliveries()) {
      if (run.bootId !== this.o.instanceId) {
        // A running run is crash recovery's to take over, with its deliveries.
        if (!hasEnded(run.status) || !(await isGone(run.bootId))) continue;
        const mine = await this.o.records.claimEnded(run.taskId, run.bootId);
        if (mine) this.schedule(mine);
      } else this.schedule(run);
    }
  }

  private after(job: Job, delayMs: number): void {
    const key = jobKey(job);
    if (this.closing.signal.aborted || this.timers.has(key) || this.queued.has(key)) return;
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.queued.add(key);
        this.lane(job.lane).queue.push(job);
        this.pump(job.lane);
      },
      Math.max(0, delayMs),
    );
    timer.unref();
    this.timers.set(key, timer);
  }

  private lane(name: string): Lane {
    let lane = this.lanes.get(name);
    if (!lane) {
      lane = { queue: [], active: 0 };
      this.lanes.set(name, lane);
    }
    return lane;
  }

  /** Starts queued attempts of one lane up to its concurrency. */
  private pump(name: string): void {
    const lane = this.lane(name);
    for (let job = lane.queue[0]; job && lane.active < (this.o.concurrency ?? 4) && !this.closing.signal.aborted; job = lane.queue[0]) {
      lane.queue.shift();
      this.queued.delete(jobKey(job));
      lane.active++;
      const attempt = this.attempt(job)
        .catch((error: unknown) => this.storeFailed(job, error))
        .finally(() => {
          lane.active--;
          this.inFlight.delete(attempt);
          if (lane.active === 0 && lane.queue.length === 0) this.lanes.delete(name);
          else this.pump(name);
        });
      this.inFlight.add(attempt);
    }
  }

  /** A store error while reading or recording an attempt: the delivery is tried again later (at least once). */
  private storeFailed(job: Job, error: unknown): void {
    if (!(error instanceof StorageError)) {
      this.o.log(`webhook delivery ${jobKey(job)} failed unexpectedly`, error);
      return;
    }
    const failures = (this.storeFailures.get(jobKey(job)) ?? 0) + 1;
    this.storeFailures.set(jobKey(job), failures);
    this.o.log(`webhook delivery ${jobKey(job)} met a store error; retried`, error);
    this.after(job, Math.min(STORE_RETRY_MAX_MS, STORE_RETRY_MS * 2 ** (failures - 1)));
  }

  private async attempt(job: Job): Promise<void> {
    const run = await this.o.records.find(job.taskId);
    const d = run?.deliveries?.find((x) => sameDelivery(x, job));
    const target = run?.webhookTargets?.[job.target];
    // Another instance took it over (this one's lease ran out), or it was settled meanwhile.
    if (!run || !d || !target || d.state !== 'pending' || run.bootId !== this.o.instanceId) return;
    const outcome = await this.post(run, d, target);
    if (outcome === undefined) return;
    const next = this.settle(d, outcome);
    const stored = await this.o.records.settleDelivery(job.taskId, next);
    this.storeFailures.delete(jobKey(job));
    const lag = next.state === 'delivered' && d.event === 'run.ended' && run.endedAt ? Date.now() - Date.parse(run.endedAt) : undefined;
    this.o.observe?.emit('deliveryAttempted', next.state === 'pending' ? 'retried' : next.state, lag);
    if (next.state === 'failed')
      this.o.log(`gave up the webhook ${deliveryId(job.taskId, d)} to ${shownUrl(target)} after ${next.attempts} attempt(s): ${next.lastError}`);
    if (stored?.bootId === this.o.instanceId && next.state === 'pending') this.after(job, (next.nextAttemptAt ?? Date.now()) - Date.now());
  }

  /** One attempt; undefined when the service is closing (the attempt does not count). */
  private async post(run: StoredRun, d: Delivery, target: WebhookTarget): Promise<Outcome | undefined> {
    const allowPrivate = this.o.allowPrivateTargets === true;
    const o = { allowPrivate, timeoutMs: this.o.timeoutMs ?? 10_000, signal: this.closing.signal };
    try {
      if (target.source !== 'reply') return await this.signed(run, d, target, o);
      const context = this.o.replyOf?.(run);
      if (!context) return { error: "the run's trigger has no reply configured", permanent: true };
      return await sendReply(run, target, context, o);
    } catch (e) {
      if (this.closing.signal.aborted) return undefined;
      const permanent = e instanceof RefusedTarget || (e as { code?: string }).code === 'ERR_WEBHOOK_TARGET_REFUSED';
      return { error: e instanceof Error ? e.message : String(e), permanent };
    }
  }

  /** One POST of the event, signed per Standard Webhooks with the target's secret. */
  private async signed(run: StoredRun, d: Delivery, target: WebhookTarget, o: PostOptions): Promise<Outcome> {
    const secret = target.source === 'workspace' ? ((await this.o.workspace(run.workspaceId))?.webhook?.secret ?? this.o.secret) : this.o.secret;
    if (secret === undefined) return { error: 'no signing secret is configured', permanent: true };
    const id = deliveryId(run.taskId, d);
    const payload = payloadOf(run, d);
    const now = new Date();
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'headless-run-webhook',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, now, payload),
    };
    const answer = await postWebhook(checkWebhookUrl(target.url, o.allowPrivate), headers, payload, o);
    const status = answer.status;
    if (status >= 200 && status <= 299) return { status, permanent: false };
    const error =
      status >= 300 && status < 400 ? `answered ${status}: redirects are not followed` : `answered ${status}${answer.answer ? `: ${answer.answer}` : ''}`;
    return { status, error, permanent: false };
  }

  /** The delivery after an attempt: delivered, failed for good, or pending with its next attempt. */
  private settle(d: Delivery, outcome: Outcome): Delivery {
    const attempts = d.attempts + 1;
    const { lastError: _last, ...base } = d;
    const next: Delivery = { ...base, attempts, ...(outcome.status === undefined ? {} : { lastStatus: outcome.status }) };
    if (outcome.error === undefined) return { ...next, state: 'delivered', nextAttemptAt: null, deliveredAt: new Date().toISOString() };
    const lastError = outcome.error.slice(0, ERROR_MAX);
    const delay = this.delays[attempts - 1];
    if (outcome.permanent || delay === undefined) return { ...next, state: 'failed', nextAttemptAt: null, lastError };
    // Jitter only lengthens a wait, so the schedule never ends before its sum.
    return { ...next, nextAttemptAt: Date.now() + Math.round(delay * (1 + Math.random() * 0.2)), lastError };
  }

  /** Stops scheduling and aborts attempts in flight; what is pending stays in the outbox for the next boot. */
  async close(): Promise<void> {
    this.closing.abort();
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.all([...this.inFlight]);
  }
}

const laneOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
};
