import { HttpProblem } from './problem';
import type { HeadlessStore } from './store';
import type { SessionState, SessionView } from './types';

const key = (resumeId: string) => `session:${resumeId}`;

/** A captured agent session id must be safe to put back on a command line. */
const AGENT_SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;

export function isSafeAgentSessionId(id: string): boolean {
  return AGENT_SESSION_ID.test(id);
}

/**
 * Product Sessions (contract §5). All Sessions are held in memory and written through to the
 * store; "busy" is in memory only, so it can be checked and taken with no await in between,
 * and a restart (which interrupts every run) frees every Session.
 */
export class SessionBook {
  private readonly sessions = new Map<string, SessionState>();
  private readonly busy = new Map<string, string>();

  constructor(
    private readonly store: HeadlessStore,
    /** Whether the Session's agent can resume at all. */
    private readonly agentResumes: (agent: string) => boolean,
  ) {}

  async load(): Promise<void> {
    for await (const [, session] of this.store.scan<SessionState>('session:')) {
      this.sessions.set(session.resumeId, session);
    }
  }

  get(resumeId: string): SessionState | undefined {
    return this.sessions.get(resumeId);
  }

  require(resumeId: string): SessionState {
    const session = this.sessions.get(resumeId);
    if (!session) throw new HttpProblem('session_not_found', `No Session "${resumeId}".`);
    return session;
  }

  isBusy(resumeId: string): boolean {
    return this.busy.has(resumeId);
  }

  /** Synchronous on purpose: callers check `isBusy` and take the Session in the same tick. */
  take(resumeId: string, taskId: string): void {
    this.busy.set(resumeId, taskId);
  }

  release(resumeId: string, taskId: string): void {
    if (this.busy.get(resumeId) === taskId) this.busy.delete(resumeId);
  }

  /** Stores a new Session; it exists in memory only once it is durable. */
  async create(session: SessionState): Promise<void> {
    await this.store.set(key(session.resumeId), session);
    this.sessions.set(session.resumeId, session);
  }

  /**
   * Applies `patch` to the latest state at once (so concurrent updates never lose each other),
   * then persists it; a refused write puts the previous state back.
   */
  async update(resumeId: string, patch: Partial<Omit<SessionState, 'resumeId'>>): Promise<SessionState> {
    const current = this.require(resumeId);
    const next = { ...current, ...patch };
    this.sessions.set(resumeId, next);
    try {
      await this.store.set(key(resumeId), next);
    } catch (error) {
      if (this.sessions.get(resumeId) === next) this.sessions.set(resumeId, current);
      throw error;
    }
    return next;
  }

  /** Not retired, its agent resumes, and the agent's own session id was captured. */
  isResumable(session: SessionState): boolean {
    return !session.retired && this.agentResumes(session.agent) && session.agentSessionId !== undefined;
  }

  async retire(resumeId: string): Promise<SessionView> {
    const session = this.require(resumeId);
    return this.view(session.retired ? session : await this.update(resumeId, { retired: true }));
  }

  view(session: SessionState): SessionView {
    return {
      resumeId: session.resumeId,
      workspaceId: session.workspaceId,
      agent: session.agent,
      status: session.retired ? 'retired' : this.busy.has(session.resumeId) ? 'busy' : 'idle',
      createdAt: session.createdAt,
      lastRunAt: session.lastRunAt,
      runCount: session.runCount,
      resumable: this.isResumable(session),
    };
  }
}
