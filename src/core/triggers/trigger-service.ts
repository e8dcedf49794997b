import { setTimeout as sleep } from 'node:timers/promises';
import { Refusal } from '../../contract/problems';
import { hasEnded } from '../../contract/records';
import { TITLE_MAX } from '../../contract/run-spec';
import type { TimelineWriter } from '../events/timeline-writer';
import type { IdempotencyKeys } from '../idempotency';
import type { HeadlessLogger } from '../logger';
import { type ScopeLimits, limitsOf } from '../runs/daily-limits';
import { type KeptStart, keptOf, keptStart } from '../runs/kept-start';
import type { StartedRun } from '../runs/live-run';
import type { RunStarter } from '../runs/run-starter';
import type { HeadlessStore } from '../store/keyv-store';
import type { ServiceObserver } from '../telemetry/observer';
import type { ReplyAddress, RunOrigin, StoredRun, Workspace } from '../types';
import { newSortableId, sha256 } from '../util/ids';
import type { DeliveryLog, DeliveryOutcome, DeliveryRecord } from './deliveries';
import { replyTarget } from './reply-spec';
import type { DeliveryFacts } from './senders';
import { type PromptTemplate, preamble, renderTemplate } from './template';
import type { Trigger } from './trigger-spec';
import { UnverifiedDeliveries } from './unverified';
import { unmatched } from './when';

export interface TriggerDeps {
  triggers: Map<string, Trigger>;
  store: HeadlessStore;
  deliveries: DeliveryLog;
  idempotency: IdempotencyKeys;
  runs: RunStarter;
  /** Where a resolution adds `trigger.resolved` to its run's timeline. */
  timeline: TimelineWriter;
  workspace(id: string): Promise<Workspace>;
  apiUrl(): string;
  logger: HeadlessLogger;
  /** Told of each delivery (`triggerDelivered`): counted in `headless_trigger_deliveries_total`. */
  observe: ServiceObserver;
}

/** What a delivery came to; the HTTP edge answers `refused` ones with their problem, the rest `202`. */
export type DeliveryDecision =
  | (Decided & { delivery: string })
  /** A sender's handshake (Slack's `url_verification`): answered at once with this body, no run, nothing logged. */
  | { outcome: 'handshake'; answer: Record<string, unknown> }
  | { outcome: 'refused'; delivery: string; code: 'invalid_body' | 'template_error' | 'rate_limited' | 'prompt_too_long'; reason: string };

/** What a delivery that was not refused came to. */
type Decided = { outcome: Exclude<DeliveryOutcome, 'refused'>; taskId?: string; reason?: string };

/** How long a copy of a delivery waits for another copy being handled, and how often it looks. */
const REPEAT_WAIT_MS = 10_000;
const REPEAT_POLL_MS = 100;
/** A copy still held after the wait: its holder may be a dead instance, whose claim goes with its lease (15 s by default). */
const REPEAT_RETRY_AFTER_S = 15;

/** A delivery that is refused, with why. */
class DeliveryRefusal extends Error {
  constructor(
    readonly code: 'invalid_body' | 'template_error' | 'rate_limited' | 'prompt_too_long',
    message: string,
  ) {
    super(message);
  }
}

/** Headers a template may read: never a credential or signature. */
const SECRET_HEADER = /authorization|signature|token|secret|cookie|api-key/i;
const MAX_PROMPT = 16_000;
const incidentKey = (trigger: string, incident: string) => `trigger-incident:${trigger}:${sha256(incident)}`;
/** The metrics' label of a delivery to a name that is no trigger: not the name, which anyone may choose. */
const NO_TRIGGER = '(none)';

/** One way a delivery is a repeat: a key, kept in its scope for the dedupe window. */
interface RepeatKey {
  scope: string;
  key: string;
}

/**
 * Turns a sender's verified delivery into a run (docs/triggers.md): read the sender's way,
 * filtered, a resolution handled, deduplicated (an idempotent start keyed by the trigger and the
 * sender's identity, kept for the window: one run per key across restarts and a fleet), limited,
 * its prompt rendered, and started, waiting in the queue when every slot is busy. Every delivery
 * is logged with what became of it.
 */
export class TriggerService {
  /** Deliveries taken per trigger this minute (this instance). */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly unverified = new UnverifiedDeliveries();

  constructor(private readonly $: TriggerDeps) {}

  get(name: string): Trigger | undefined {
    const trigger = this.$.triggers.get(name);
    return trigger && trigger.definition.enabled !== false ? trigger : undefined;
  }

  has(name: string): boolean {
    return this.$.triggers.has(name);
  }

  /** Its deliveries log, and the sample of those that failed verification (never logged one by one). */
  async deliveries(name: string, limit: number, cursor?: string) {
    return { ...(await this.$.deliveries.list(name, limit, cursor)), unverified: this.unverified.of(name) };
  }

  /** The daily limits of the triggers of these workspaces that have any (docs/queue-and-schedules.md: Daily limits). */
  dailyLimits(workspaceIds: string[]): Record<string, ScopeLimits> {
    return limitsOf(
      [...this.$.triggers.values()].map(({ definition: d }) => d),
      workspaceIds,
    );
  }

  list() {
    return [...this.$.triggers.values()].map(({ definition: d, verify, warnings }) => ({
      name: d.name,
      workspace: d.workspace,
      sender: d.sender,
      verify: verify.method,
      enabled: d.enabled !== false,
      ...(d.run?.agent === undefined ? {} : { agent: d.run.agent }),
      ...(warnings.length > 0 ? { warnings } : {}),
    }));
  }

  /**
   * Counts a delivery refused before it was read (a wrong or missing signature), and samples it
   * for a configured trigger: in memory, never a durable write, the same steps whether the name
   * is a trigger or not. No content of it is kept.
   */
  refusedUnverified(name: string, peer: string | undefined): void {
    const known = this.$.triggers.has(name);
    this.$.observe.emit('triggerDelivered', known ? name : NO_TRIGGER, 'unverified');
    if (known) this.unverified.add(name, peer);
  }

  /** Handles a verified delivery of `trigger`: its body JSON, or a form where its sender sends them (`form`). */
  async deliver(trigger: Trigger, body: string, headers: Headers, traceparent?: string, form = false): Promise<DeliveryDecision> {
    const id = this.$.deliveries.newId();
    const base: DeliveryRecord = { id, trigger: trigger.definition.name, receivedAt: new Date().toISOString(), outcome: 'refused' };
    try {
      const payload = form ? Object.fromEntries(new URLSearchParams(body)) : parsePayload(body);
      const handshake = trigger.sender.handshake?.(payload);
      if (handshake) return { outcome: 'handshake', answer: handshake };
      const facts = trigger.sender.read(payload, headers);
      const record = { ...base, ...pick(facts) };
      const context = contextOf(trigger, payload, headers, facts);
      const decision: Decided = await this.decide(trigger, { context, facts, body }, record, traceparent);
      await this.log({ ...record, ...decision });
      return { ...decision, delivery: id };
    } catch (error) {
      if (error instanceof DeliveryRefusal) {
        await this.log({ ...base, reason: error.message });
        return { outcome: 'refused', delivery: id, code: error.code, reason: error.message };
      }
      // Not taken now (its trigger's share is full, the service is closing): answered 429 or 503 for the sender to retry.
      if (error instanceof Refusal) await this.log({ ...base, reason: error.message });
      throw error;
    }
  }

  private async decide(
    trigger: Trigger,
    read: { context: Record<string, unknown>; facts: DeliveryFacts; body: string },
    record: DeliveryRecord,
    traceparent?: string,
  ): Promise<Decided> {
    const { context, facts } = read;
    if (facts.skip !== undefined) return { outcome: 'filtered' as const, reason: facts.skip };
    const missed = unmatched(trigger.definition.when, context);
    if (missed !== undefined) return { outcome: 'filtered' as const, reason: `${missed} does not match` };
    const onResolved = trigger.definition.resolved ?? 'annotate';
    if (facts.status === 'resolved' && onResolved !== 'run') return this.resolve(trigger, facts, record.id, onResolved);
    const start = (taskId: string) => this.start(trigger, context, facts, { taskId, delivery: record.id, traceparent });
    const [first, ...rest] = await this.repeatKeys(trigger, read);
    if (first === undefined) return this.started(await start(newSortableId('run_')));
    return this.dedupe(trigger, [first, ...rest], start);
  }

  /**
   * What makes a delivery a repeat: the sender's key (or `dedupe.key`) and, where the sender's
   * delivery id is not signed, the signed body too, so a captured delivery sent again under a new
   * id is still a repeat (docs/triggers.md: Filters, repeats and resolutions).
   */
  private async repeatKeys(trigger: Trigger, read: { context: Record<string, unknown>; facts: DeliveryFacts; body: string }): Promise<RepeatKey[]> {
    const name = trigger.definition.name;
    const key = trigger.dedupeKey ? await this.render(trigger.dedupeKey, read.context) : read.facts.dedupeKey;
    return [
      ...(key === undefined ? [] : [{ scope: `trigger:${name}`, key: `trigger:${name}:${sha256(key)}` }]),
      ...(trigger.sender.unsignedId ? [{ scope: `trigger-body:${name}`, key: sha256(read.body) }] : []),
    ];
  }

  /**
   * One run per key within the window: a repeat by any of its keys gets the first run's id and
   * starts nothing. A copy that arrives while another is being handled waits for it (bounded):
   * it is then answered with that copy's run, or, if that copy made none (its start was refused),
   * it is handled itself. Never a `2xx` without a run: a copy still held past the wait (its
   * holder may have died in a fleet, until its lease runs out) is `503 delivery_in_progress`.
   */
  private async dedupe(trigger: Trigger, keys: [RepeatKey, ...RepeatKey[]], start: (taskId: string) => Promise<StartedRun>): Promise<Decided> {
    const until = Date.now() + REPEAT_WAIT_MS;
    for (let waited = false; ; waited = true) {
      try {
        const { answer, replayed } = await this.once(trigger, keys, start);
        if (replayed) {
          await this.logFirstCopy(answer.taskId);
          return { outcome: 'deduplicated' as const, taskId: answer.taskId, reason: 'seen within the dedupe window' };
        }
        return { outcome: answer.status === 'queued' ? ('queued' as const) : ('started' as const), taskId: answer.taskId };
      } catch (error) {
        if (!(error instanceof Refusal && error.code === 'idempotency_key_in_use')) throw error;
      }
      if (Date.now() >= until)
        throw new Refusal('delivery_in_progress', 'the same delivery is still being handled; retry it', { retryAfterSeconds: REPEAT_RETRY_AFTER_S });
      if (!waited) this.$.logger.info({ trigger: trigger.definition.name }, 'a repeat waits for the copy of its delivery being handled');
      await sleep(REPEAT_POLL_MS);
    }
  }

  /**
   * Claims the first key, then within it the rest: the run starts only if none was seen; each key
   * keeps the run. A repeat by an inner key is one by the outer keys too (`replayed`).
   */
  private async once(
    trigger: Trigger,
    [first, ...rest]: [RepeatKey, ...RepeatKey[]],
    start: (taskId: string) => Promise<StartedRun>,
  ): Promise<{ answer: KeptStart; replayed: boolean }> {
    let repeat = false;
    const execute = async (taskId: string): Promise<KeptStart> => {
      const [next, ...after] = rest;
      if (next === undefined) return keptOf((await start(taskId)).record);
      const inner = await this.once(trigger, [next, ...after], start);
      repeat = inner.replayed;
      return inner.answer;
    };
    const name = trigger.definition.name;
    const kept = await this.$.idempotency.once(first.scope, first.key, { trigger: name }, keptStart(execute, this.$.runs), trigger.windowMs);
    return { answer: kept.answer, replayed: kept.replayed || repeat };
  }

  private started(run: StartedRun) {
    return { outcome: run.record.status === 'queued' ? ('queued' as const) : ('started' as const), taskId: run.record.taskId };
  }

  private async start(
    trigger: Trigger,
    context: Record<string, unknown>,
    facts: DeliveryFacts,
    at: { taskId: string; delivery: string; traceparent?: string },
  ): Promise<StartedRun> {
    const d = trigger.definition;
    this.take(trigger);
    const prompt = preamble(d.name, d.sender) + (await this.render(trigger.prompt, context));
    if (prompt.length > MAX_PROMPT)
      throw new DeliveryRefusal('prompt_too_long', `the rendered prompt has ${prompt.length} characters, more than ${MAX_PROMPT}`);
    const title = trigger.title ? (await this.render(trigger.title, context)).trim().slice(0, TITLE_MAX) : '';
    const origin: RunOrigin = {
      source: { kind: 'trigger', name: d.name, delivery: at.delivery, ...(facts.deliveryId ? { deliveryId: facts.deliveryId } : {}) },
      // Its title is a template: what it rendered to, or none where that is blank.
      run: { ...d.run, title: title === '' ? undefined : title },
      ...(d.limits === undefined ? {} : { limits: d.limits }),
      queueWhenBusy: true,
      share: { key: `trigger:${d.name}`, running: d.limits?.concurrent, queued: d.limits?.queued },
      ...(at.traceparent === undefined ? {} : { traceparent: at.traceparent }),
      ...this.replyOf(trigger, facts),
    };
    const workspace = await this.$.workspace(d.workspace);
    const run = await this.$.runs.start({ workspace, request: { prompt, wait: false }, apiUrl: this.$.apiUrl(), taskId: at.taskId, origin });
    if (facts.incident !== undefined) await this.$.store.set(incidentKey(d.name, facts.incident), run.record.taskId, trigger.windowMs);
    return run;
  }

  /** Its reply's place, where the trigger replies and the delivery names one; a slash command's `response_url` elsewhere than Slack is not taken. */
  private replyOf(trigger: Trigger, facts: DeliveryFacts): { reply?: { url: string; address: ReplyAddress } } {
    const target = trigger.reply && replyTarget(trigger.reply, facts);
    if (trigger.reply && !target)
      this.$.logger.warn({ trigger: trigger.definition.name }, 'this delivery names no place to reply to: its run ends without a reply');
    return target ? { reply: target } : {};
  }

  /** A resolution: the incident's run is cancelled or annotated (or nothing is done). */
  private async resolve(trigger: Trigger, facts: DeliveryFacts, delivery: string, action: 'cancel' | 'annotate' | 'ignore') {
    const name = trigger.definition.name;
    if (action === 'ignore' || facts.incident === undefined)
      return { outcome: 'resolved' as const, reason: action === 'ignore' ? 'ignored' : 'no incident to match' };
    const taskId = await this.$.store.get<string>(incidentKey(name, facts.incident));
    const run = taskId === undefined ? undefined : await this.$.runs.find(taskId);
    if (!run) return { outcome: 'resolved' as const, reason: 'no run of this incident' };
    const cancel = action === 'cancel' && !hasEnded(run.status);
    if (cancel) await this.$.runs.cancel(run.taskId).catch(() => undefined);
    const told = this.$.timeline.append(run.taskId, 'trigger.resolved', {
      trigger: name,
      delivery,
      ...(facts.event ? { event: facts.event } : {}),
      cancelled: cancel,
    });
    return { outcome: 'resolved' as const, taskId: run.taskId, reason: cancel ? 'its run was cancelled' : toldReason(told, run) };
  }

  private async render(template: PromptTemplate, context: Record<string, unknown>): Promise<string> {
    try {
      return await renderTemplate(template, context);
    } catch (error) {
      throw new DeliveryRefusal('template_error', `the template cannot be rendered for this delivery: ${(error as Error).message}`);
    }
  }

  /** A token of the trigger's rate: refused once a minute's worth is spent. */
  private take(trigger: Trigger): void {
    const perMinute = trigger.definition.limits?.perMinute;
    if (perMinute === undefined) return;
    const now = Date.now();
    const bucket = this.buckets.get(trigger.definition.name) ?? { tokens: perMinute, at: now };
    bucket.tokens = Math.min(perMinute, bucket.tokens + ((now - bucket.at) * perMinute) / 60_000);
    bucket.at = now;
    this.buckets.set(trigger.definition.name, bucket);
    if (bucket.tokens < 1) throw new DeliveryRefusal('rate_limited', `more than ${perMinute} deliveries a minute`);
    bucket.tokens -= 1;
  }

  /**
   * A repeat's first copy started its run but its service stopped before logging it (a kill -9
   * before its answer, which the sender then retries): its log entry is written now, from its run.
   */
  private async logFirstCopy(taskId: string): Promise<void> {
    const run = await this.$.runs.find(taskId).catch(() => undefined);
    const source = run?.source;
    if (!run || source?.kind !== 'trigger' || (await this.$.deliveries.has(source.delivery).catch(() => true))) return;
    const first: DeliveryRecord = { id: source.delivery, trigger: source.name, receivedAt: run.createdAt, outcome: 'started', taskId };
    await this.log({
      ...first,
      ...(source.deliveryId ? { deliveryId: source.deliveryId } : {}),
      reason: 'logged when a repeat came: the service stopped before it logged this copy',
    });
  }

  private async log(record: DeliveryRecord): Promise<void> {
    this.$.observe.emit('triggerDelivered', record.trigger, record.outcome);
    this.$.logger.info(
      { trigger: record.trigger, delivery: record.id, outcome: record.outcome, taskId: record.taskId, reason: record.reason },
      'trigger delivery',
    );
    await this.$.deliveries
      .add(record)
      .catch((error: unknown) => this.$.logger.warn({ trigger: record.trigger, error: String(error) }, 'could not log a trigger delivery'));
  }
}

/** What an annotation did, truthfully: an ended run's timeline is closed, and a run another instance runs has its timeline there. */
function toldReason(told: boolean, run: StoredRun): string {
  if (told) return 'its run was told';
  return hasEnded(run.status) ? 'its run had already ended: nothing was added to it' : 'its run was not told: it is not running on this instance';
}

function parsePayload(body: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw new DeliveryRefusal('invalid_body', 'the body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new DeliveryRefusal('invalid_body', 'the body must be a JSON object');
  return value as Record<string, unknown>;
}

const pick = (facts: DeliveryFacts) => ({
  ...(facts.event === undefined ? {} : { event: facts.event.slice(0, 200) }),
  ...(facts.status === undefined ? {} : { status: facts.status }),
  ...(facts.deliveryId === undefined ? {} : { deliveryId: facts.deliveryId.slice(0, 200) }),
});

function contextOf(trigger: Trigger, payload: Record<string, unknown>, headers: Headers, facts: DeliveryFacts): Record<string, unknown> {
  const safe: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (!SECRET_HEADER.test(name)) safe[name.toLowerCase()] = value;
  });
  const d = trigger.definition;
  const fields = facts.fields === undefined ? {} : { [d.sender]: facts.fields };
  return { payload, headers: safe, event: facts.event, status: facts.status, deliveryId: facts.deliveryId, trigger: d.name, ...fields };
}
