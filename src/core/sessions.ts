import { BoundedCache } from './util/bounded-cache';
import type { Fleet } from './fleet/fleet';
import { Refusal } from '../contract/problems';
import type { HeadlessStore } from './store/keyv-store';
import type { SessionState } from './types';
import type { SessionView } from '../contract/records';

const key = (resumeId: string) => `session:${resumeId}`;
/** The claim a run holds on its Session while it runs. */
const busyKey = (resumeId: string) => `busy:${resumeId}`;

/** A captured agent session id must be safe to put back on a command line. */
const AGENT_SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;

export function isSafeAgentSessionId(id: string): boolean {
  return AGENT_SESSION_ID.test(id);
}

/** Sessions kept in memory at most; the rest are read from the store when asked for. */
const CACHE_SIZE = 5000;

/**
 * Product Sessions (docs/http-api.md: Sessions), stored in the store and read through a bounded cache
 * (none when instances share the store: another may have changed it). "Busy" is a claim in the
 * fleet, taken atomically by the run that resumes it and dropped with its instance. Updates to
 * one Session run one after another, each on the latest state (across instances, under the
 * fleet's lock), so concurrent changes never lose each other.
 */
export class SessionBook {
  private readonly cache: BoundedCache<string, SessionState> | undefined;
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly store: HeadlessStore,
    private readonly fleet: Fleet,
    /** Whether the Session's agent can resume at all. */
    private readonly agentResumes: (agent: string) => boolean,
    private readonly log: (message: string, error?: unknown) => void,
  ) {
    this.cache = fleet.shared ? undefined : new BoundedCache(CACHE_SIZE);
  }

  private remember(session: SessionState): void {
    this.cache?.set(session.resumeId, session);
  }

  async get(resumeId: string): Promise<SessionState | undefined> {
    const cached = this.cache?.get(resumeId);
    if (cached) return cached;
    const stored = await this.store.get<SessionState>(key(resumeId));
    // An update may have landed while the store was read: the cache then holds the newer state.
    const fresher = this.cache?.get(resumeId);
    if (fresher) return fresher;
    if (stored) this.remember(stored);
    return stored;
  }

  async require(resumeId: string): Promise<SessionState> {
    const session = await this.get(resumeId);
    if (!session) throw new Refusal('session_not_found', `No Session "${resumeId}".`);
    return session;
  }

  /** Marks the Session busy with `taskId`, atomically; false if another run has it. */
  async take(resumeId: string, taskId: string): Promise<boolean> {
    return (await this.fleet.claim(busyKey(resumeId), taskId)) === undefined;
  }

  /** Frees the Session, if `taskId` holds it; a failed release is logged (the claim then goes with this instance). */
  async release(resumeId: string, taskId: string): Promise<void> {
    await this.fleet.release(busyKey(resumeId), taskId).catch((e: unknown) => this.log(`could not free Session ${resumeId}`, e));
  }

  /**
   * Deletes the Sessions whose last run started before `cutoff` and that no run holds; returns how
   * many. One pass over the Sessions (retention's, hourly), giving way to requests between batches.
   */
  async prune(cutoff: string): Promise<number> {
    let count = 0;
    let seen = 0;
    for await (const [, session] of this.store.scan<SessionState>('session:')) {
      if (++seen % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
      if (session.lastRunAt >= cutoff || (await this.fleet.holder(busyKey(session.resumeId))) !== undefined) continue;
      await this.store.delete(key(session.resumeId));
      this.cache?.delete(session.resumeId);
      count++;
    }
    return count;
  }

  /** Stores a new Session; it can be found only once it is durable. */
  async create(session: SessionState): Promise<void> {
    await this.store.set(key(session.resumeId), session);
    this.remember(session);
  }

  /**
   * Applies `change` to the latest stored state and persists the result, after any earlier
   * update of the same Session. An empty change writes nothing.
   */
  update(resumeId: string, change: (current: SessionState) => Partial<Omit<SessionState, 'resumeId'>>): Promise<SessionState> {
    const apply = () =>
      this.fleet.exclusive(key(resumeId), async () => {
        const current = await this.require(resumeId);
        const patch = change(current);
        if (Object.keys(patch).length === 0) return current;
        const next = { ...current, ...patch };
        await this.store.set(key(resumeId), next);
        this.remember(next);
        return next;
      });
    const previous = this.queues.get(resumeId) ?? Promise.resolve();
    const result = previous.then(apply, apply);
    const settled = result.catch(() => undefined);
    this.queues.set(resumeId, settled);
    void settled.then(() => {
      if (this.queues.get(resumeId) === settled) this.queues.delete(resumeId);
    });
    return result;
  }

  /**
   * Records the agent's own session id, if it is safe to put back on a command line. Settles
   * once stored; a failed write is logged, never thrown.
   */
  async noteAgentSessionId(resumeId: string, captured: string | undefined): Promise<void> {
    if (captured === undefined || !isSafeAgentSessionId(captured)) return;
    await this.setAgentSessionId(resumeId, captured);
  }

  /**
   * Sets the agent session id, or clears it with `undefined` (a run that failed before its model
   * answered puts back the one the Session had). A failed write is logged, never thrown.
   */
  async setAgentSessionId(resumeId: string, id: string | undefined): Promise<void> {
    await this.update(resumeId, (s) => (s.agentSessionId === id ? {} : { agentSessionId: id })).catch((e: unknown) =>
      this.log('could not store the agent session id', e),
    );
  }

  /** Not retired, its agent resumes, and the agent's own session id was captured. */
  isResumable(session: SessionState): boolean {
    return !session.retired && this.agentResumes(session.agent) && session.agentSessionId !== undefined;
  }

  async retire(resumeId: string): Promise<SessionView> {
    return this.view(await this.update(resumeId, (s) => (s.retired ? {} : { retired: true })));
  }

  async view(session: SessionState): Promise<SessionView> {
    const busy = !session.retired && (await this.fleet.holder(busyKey(session.resumeId))) !== undefined;
    return {
      resumeId: session.resumeId,
      workspaceId: session.workspaceId,
      agent: session.agent,
      status: session.retired ? 'retired' : busy ? 'busy' : 'idle',
      createdAt: session.createdAt,
      lastRunAt: session.lastRunAt,
      runCount: session.runCount,
      resumable: this.isResumable(session),
    };
  }
}
