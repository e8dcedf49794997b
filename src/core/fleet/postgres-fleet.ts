import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { Refusal } from '../../contract/problems';
import type { SqlDatabase } from '../store/sql-database';
import { newSortableId } from '../util/ids';
import type { AdvertisedWorkspace, Fleet, FleetAnswer, FleetHandlers, FleetOptions, FleetRequest } from './fleet';
import { type FleetQueue, PgBossQueue } from './fleet-queue';
import { MACHINE } from '../process/machine';
import { claim, exclusive, holderOf, release } from './postgres-claims';
import { DROP_GONE_SERVED, advertise, advertised, withdraw } from './postgres-served';

const ASK_TIMEOUT_MS = 5000;
/**
 * A request that acts (a cancel, a follow-up) is acted on only by whoever claims it first: its
 * owner, to act, or its asker, giving up. So an asker's `503 run_owner_unreachable` is never
 * carried out later by an owner that heard it late (a pause, a slow connection): a retry meets the
 * run as it was. Each side keeps its claim a while, for a late delivery or answer to find.
 */
const ACTS: ReadonlySet<FleetRequest['op']> = new Set(['cancel', 'message']);
const ACTING = 'acting';
const WITHDRAWN = 'withdrawn';
const CLAIM_KEEP_MS = 10 * 60_000;
const askKey = (id: string) => `fleet-ask:${id}`;
const UNREACHABLE: FleetAnswer = { ok: false, code: 'run_owner_unreachable', message: 'The instance running this run did not answer; retry shortly.' };
/** A failed renewal is tried again after this, until it succeeds. */
const RENEW_RETRY_MS = 500;
/** The channel the database announces each change of a run record on (store/migrations.ts: version 2). */
const RUN_CHANGED = 'headless_run_changed';
/** A key for `pg_try_advisory_lock`: one sweeper at a time in the whole fleet. */
const SWEEP_LOCK = "hashtext('headless-run-webhook:sweep')";

interface Envelope {
  id: string;
  from: string;
  request?: FleetRequest;
  answer?: FleetAnswer;
}

/**
 * Instances on one PostgreSQL database. Each holds a lease (a row in `headless_instances`,
 * renewed every third of its length); an instance whose lease has run out is gone, and one
 * sweeper (under an advisory lock) takes over what it left. Claims are rows in
 * `headless_claims` (`INSERT … ON CONFLICT DO NOTHING`), dropped with their owner. Requests
 * between instances go by `NOTIFY` on the owner's channel, answered on the asker's.
 */
export class PostgresFleet implements Fleet {
  readonly instanceId = newSortableId('boot_');
  readonly shared = true;
  readonly queue: FleetQueue;
  private readonly leaseMs: number;
  private pg!: typeof pg;
  private pool: pg.Pool | undefined;
  /** Connections for sections that take others inside them: never waiting on the pool those take from. */
  private outer: pg.Pool | undefined;
  /** LISTENs on this instance's channel and holds the sweep lock while sweeping. */
  private listener: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private handlers: FleetHandlers | undefined;
  private readonly waiting = new Map<string, (answer: FleetAnswer) => void>();
  private ticking: Promise<void> = Promise.resolve();
  private left = false;
  /** When the lease last written runs out, by this machine's clock. */
  private heldUntil = 0;
  /** A probe of the listener under way, beside the renewals. */
  private probing = false;
  /** A sweep under way, beside the renewals. */
  private sweeping: Promise<void> | undefined;
  /** What it advertised: told again when its lease ran out and is held again. */
  private served: AdvertisedWorkspace[] = [];
  /** Whether every change of a run record since what was kept has been heard: false from a cut listener until it listens again and what was kept is dropped. */
  private heard = false;

  constructor(
    private readonly sql: SqlDatabase,
    private readonly connectionString: string,
    private readonly o: FleetOptions,
  ) {
    this.leaseMs = o.leaseMs ?? 15_000;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 1000) throw new Error(`the instance lease must be at least 1000 ms, not ${this.leaseMs}`);
    this.queue = new PgBossQueue({ connectionString, name: `headless-run-webhook ${this.instanceId} queue`, log: o.log });
  }

  /** How long the listener may take to answer before its connection is taken for lost: a lease, as a busy machine may be slow. */
  private get probeMs(): number {
    return this.leaseMs;
  }

  /** A query that fails, rather than waits on, a connection that does not answer (pg reads a query's own `query_timeout`; its types leave it out). */
  private timed(text: string): pg.QueryConfig {
    return { text, query_timeout: this.probeMs } as pg.QueryConfig;
  }

  private get lease(): string {
    return `${this.leaseMs} milliseconds`;
  }

  async join(handlers: FleetHandlers): Promise<void> {
    this.handlers = handlers;
    this.pg = (await import('pg')).default;
    // Connections of its own: a transaction per exclusive section, and a listener.
    this.pool = new this.pg.Pool({ connectionString: this.connectionString, max: 4 });
    // An idle connection dropped by the server must not crash the service; the next query reconnects.
    this.pool.on('error', (error) => this.o.log('a fleet database connection failed', error));
    this.outer = new this.pg.Pool({ connectionString: this.connectionString, max: 2 });
    this.outer.on('error', (error) => this.o.log('a fleet database connection failed', error));
    // Its tables are the store's migration 3 (store/migrations.ts), made before any instance joins.
    await this.register(Date.now());
    await this.listen();
    this.heard = true;
    await this.sweep();
    this.timer = setInterval(
      () => {
        // One tick at a time: a slow database never piles them up.
        this.ticking = this.ticking.then(() => this.tick());
      },
      Math.floor(this.leaseMs / 3),
    );
    this.timer.unref();
  }

  /** Writes this instance's lease (again, after it ran out), held from `asked` on. */
  private async register(asked: number): Promise<void> {
    await this.sql.query(
      'INSERT INTO headless_instances (id, machine, expires_at) VALUES ($1, $2, now() + $3::interval) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at',
      [this.instanceId, MACHINE, this.lease],
    );
    this.heldUntil = asked + this.leaseMs;
  }

  leaseHeld(): boolean {
    return !this.left && Date.now() < this.heldUntil;
  }

  hearsChanges(): boolean {
    return this.heard && this.listener !== undefined && !this.left;
  }

  private async listen(): Promise<void> {
    // Named, so an operator can tell each instance's listener in pg_stat_activity.
    const client = new this.pg.Client({
      connectionString: this.connectionString,
      application_name: `headless-run-webhook ${this.instanceId}`,
      keepAlive: true,
    });
    client.on('error', (error) => this.dropListener(client, error));
    client.on('notification', (message) => {
      if (!message.payload) return;
      if (message.channel === RUN_CHANGED) {
        const [taskId = '', workspaceId = ''] = message.payload.split(' ');
        this.handlers?.changed(taskId, workspaceId);
      } else this.receive(message.payload);
    });
    await client.connect();
    await client.query(`LISTEN "${this.instanceId}"`);
    await client.query(`LISTEN ${RUN_CHANGED}`);
    this.listener = client;
  }

  private async tick(): Promise<void> {
    if (this.left) return;
    try {
      const asked = Date.now();
      const renewed = await this.sql.query(
        'UPDATE headless_instances SET expires_at = now() + $2::interval WHERE id = $1 AND expires_at >= now() RETURNING id',
        [this.instanceId, this.lease],
      );
      if (renewed.length === 0) {
        this.o.log(`the lease of instance ${this.instanceId} ran out; its runs were taken over by another instance`);
        this.handlers?.lost();
        await this.register(asked);
        // What it advertised went with its lease: told again, or starts elsewhere would find no member for its workspaces.
        await this.advertise(this.served);
      } else this.heldUntil = asked + this.leaseMs;
      if (!this.listener) {
        await this.listen();
        this.handlers?.reconnected();
        this.heard = true;
      } else this.probeAside();
      // Beside the renewals, never in their way: a slow sweep must not cost this instance its lease.
      this.sweepAside();
    } catch (error) {
      this.o.log('the fleet could not renew its lease or sweep; retrying', error);
      // Renewal is retried at once and often, not at the next tick: a database outage shorter
      // than what is left of the lease then costs nothing (lost only once it has run out).
      clearTimeout(this.retry);
      this.retry = setTimeout(() => {
        this.ticking = this.ticking.then(() => this.tick());
      }, RENEW_RETRY_MS);
      this.retry.unref();
    }
  }

  /** Takes over what gone instances left, if no other instance is sweeping. */
  /**
   * Asks the listening connection for an answer, beside the renewals: one that does not come in
   * time (a connection half-open, its server process stalled) is dropped, so nothing kept is read
   * until this instance listens again, at the next renewal.
   */
  private probeAside(): void {
    const client = this.listener;
    if (!client || this.probing) return;
    this.probing = true;
    client
      .query(this.timed('SELECT 1'))
      .catch((error: unknown) => this.dropListener(client, error))
      .finally(() => {
        this.probing = false;
      });
  }

  private dropListener(client: pg.Client, error: unknown): void {
    this.o.log('the fleet listener lost its database connection; reconnecting', error);
    if (this.listener === client) this.listener = undefined;
    // Changes made meanwhile go unheard: nothing kept may be read until it listens again.
    this.heard = false;
    client.end().catch(() => undefined);
  }

  private sweepAside(): void {
    if (this.sweeping || this.left) return;
    this.sweeping = this.sweep()
      .catch((error: unknown) => this.o.log('the fleet could not sweep; it tries again at the next renewal', error))
      .finally(() => {
        this.sweeping = undefined;
      });
  }

  /** Takes over what gone instances left, if no other instance is sweeping (the lock is its connection's: released with it, whatever happens; a stalled one holds up only the sweep). */
  private async sweep(): Promise<void> {
    const pool = this.pool;
    if (!pool) return;
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      const { rows } = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${SWEEP_LOCK}) AS locked`);
      if (!rows[0]?.locked) return;
      try {
        await this.takeOverGone();
      } finally {
        await client.query(`SELECT pg_advisory_unlock(${SWEEP_LOCK})`);
      }
    } catch (error) {
      broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** Takes over what gone instances left, then drops what they held. */
  private async takeOverGone(): Promise<void> {
    let alive: Promise<Set<string>> | undefined;
    const living = () => {
      alive ??= this.sql.query<{ id: string }>('SELECT id FROM headless_instances WHERE expires_at >= now()').then((r) => new Set(r.map((i) => i.id)));
      return alive;
    };
    const isGone = async (owner: string | undefined) => owner === undefined || !(await living()).has(owner);
    await this.handlers?.takeOver(isGone);
    // What the gone ones held goes with them, once their runs have ended; an instance whose
    // lease ran out during the sweep is left for the next one.
    const kept = [...(await living())];
    await this.sql.query(
      'DELETE FROM headless_claims WHERE NOT (owner = ANY($1)) AND owner NOT IN (SELECT id FROM headless_instances WHERE expires_at >= now())',
      [kept],
    );
    await this.sql.query(DROP_GONE_SERVED, [kept]);
    await this.sql.query('DELETE FROM headless_instances WHERE expires_at < now() AND NOT (id = ANY($1))', [kept]);
  }

  async advertise(workspaces: AdvertisedWorkspace[]): Promise<void> {
    this.served = workspaces;
    await advertise(this.sql, this.instanceId, workspaces);
  }

  advertised(id: string): Promise<AdvertisedWorkspace | undefined> {
    return advertised(this.sql, id);
  }

  claim(key: string, holder: string): Promise<string | undefined> {
    return claim(this.sql, this.instanceId, key, holder);
  }

  release(key: string, holder: string): Promise<void> {
    return release(this.sql, key, holder);
  }

  holder(key: string): Promise<string | undefined> {
    return holderOf(this.sql, key);
  }

  exclusive<T>(key: string, work: () => Promise<T>, o: { nests?: boolean } = {}): Promise<T> {
    const pool = o.nests ? this.outer : this.pool;
    if (!pool) throw new Error('the fleet has not joined yet');
    return exclusive(pool, key, work);
  }

  async ask(instanceId: string, request: FleetRequest): Promise<FleetAnswer> {
    const id = randomUUID();
    const answered = this.answerTo(id, ACTS.has(request.op));
    await this.notify(instanceId, { id, from: this.instanceId, request });
    return answered;
  }

  /** The answer to request `id`; one that `acts` is given up on only once its asker's claim says its owner will never act on it. */
  private answerTo(id: string, acts: boolean): Promise<FleetAnswer> {
    return new Promise<FleetAnswer>((resolve) => {
      let timer: NodeJS.Timeout;
      const finish = (answer: FleetAnswer) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(answer);
      };
      const giveUp = async () => {
        const holder = acts ? await this.claim(askKey(id), WITHDRAWN).catch(() => undefined) : undefined;
        // Its owner claimed it first: it acts on it, and its answer is on the way.
        if (holder === ACTING) {
          timer = setTimeout(() => finish(UNREACHABLE), ASK_TIMEOUT_MS);
          return;
        }
        if (acts && holder === undefined) this.forget(askKey(id), WITHDRAWN);
        finish(UNREACHABLE);
      };
      timer = setTimeout(() => void giveUp(), ASK_TIMEOUT_MS);
      this.waiting.set(id, finish);
    });
  }

  private async notify(channel: string, envelope: Envelope): Promise<void> {
    await this.sql.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify(envelope)]);
  }

  private receive(payload: string): void {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(payload) as Envelope;
    } catch {
      return;
    }
    if (envelope.answer) {
      this.waiting.get(envelope.id)?.(envelope.answer);
      return;
    }
    const { request } = envelope;
    const handlers = this.handlers;
    if (!request || !handlers) return;
    void this.mayAct(envelope.id, request)
      .then(async (may) => {
        // Its asker gave up on it (answered 503): acting now would make that answer untrue.
        if (!may) return;
        const answer = await handlers.answer(request).catch((error: unknown): FleetAnswer => {
          if (error instanceof Refusal) return { ok: false, code: error.code, message: error.message };
          this.o.log(`could not answer a request of instance ${envelope.from}`, error);
          return { ok: false, code: 'internal', message: 'The instance running this run failed to act on it.' };
        });
        await this.notify(envelope.from, { id: envelope.id, from: this.instanceId, answer });
        if (ACTS.has(request.op)) this.forget(askKey(envelope.id), ACTING);
      })
      .catch((error: unknown) => this.o.log(`could not answer instance ${envelope.from}`, error));
  }

  /** Releases a request's claim once no late delivery or late answer can still need it. */
  private forget(key: string, holder: string): void {
    setTimeout(() => void this.release(key, holder).catch(() => undefined), CLAIM_KEEP_MS).unref();
  }

  /** Whether this instance may act on request `id`: it is no request that acts, or this instance claimed it before its asker gave up. */
  private async mayAct(id: string, request: FleetRequest): Promise<boolean> {
    if (!ACTS.has(request.op)) return true;
    return (await this.claim(askKey(id), ACTING)) === undefined;
  }

  async leave(): Promise<void> {
    this.left = true;
    clearInterval(this.timer);
    clearTimeout(this.retry);
    await this.ticking;
    await this.sweeping;
    await this.queue.close();
    await withdraw(this.sql, this.instanceId)
      .then(() => this.sql.query('DELETE FROM headless_instances WHERE id = $1', [this.instanceId]))
      .catch((error: unknown) => this.o.log('could not leave the fleet', error));
    await this.listener?.end().catch(() => undefined);
    await this.pool?.end().catch(() => undefined);
    await this.outer?.end().catch(() => undefined);
  }
}
