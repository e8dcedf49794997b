import type { AgentRegistry } from './agents/registry';
import { probeEnv } from './agents/preflight';
import type { AgentAdapter } from './agents/types';
import { newSortableId } from './ids';
import { HttpProblem } from './problem';
import type { StartRequest } from './schemas';
import type { SessionBook } from './sessions';
import type { HeadlessStore } from './store';
import type { SessionState, Workspace } from './types';

const lastAgentKey = (workspaceId: string) => `workspace:${workspaceId}`;

/** An admitted run's slot and Session, held until `release`. */
export interface Reservation {
  adapter: AgentAdapter;
  /** The Session being resumed; absent when the run starts a new one. */
  session?: SessionState;
  resumeId: string;
  taskId: string;
  /** Frees the capacity slot and the Session; only the first call counts. */
  release(): void;
}

export interface AdmissionOptions {
  registry: AgentRegistry;
  sessions: SessionBook;
  store: HeadlessStore;
  maxConcurrentRuns: number;
  defaultAgent?: string;
  /** The environment runs start from: selection only takes agents found on its (or the workspace's) `PATH`. */
  baseEnv: NodeJS.ProcessEnv;
  log: (message: string, error?: unknown) => void;
}

/**
 * Admission of a run: the agent choice, the Session rules and host capacity, in the documented
 * order. After the last await (reading the Session, probing candidate agents), the busy,
 * resumable and capacity checks and the taking of the slot and the Session happen in one tick,
 * so two requests can never both pass a check that only one may pass.
 */
export class Admission {
  private active = 0;
  private closed = false;
  private readonly lastAgent = new Map<string, string>();

  constructor(private readonly o: AdmissionOptions) {}

  /** Runs holding a slot now. */
  get running(): number {
    return this.active;
  }

  async loadLastAgents(): Promise<void> {
    for await (const [, meta] of this.o.store.scan<{ workspaceId: string; lastAgent: string }>('workspace:')) {
      this.lastAgent.set(meta.workspaceId, meta.lastAgent);
    }
  }

  /** From now on every start is refused with 503 shutting_down. */
  close(): void {
    this.closed = true;
  }

  async admit(workspace: Workspace, request: StartRequest): Promise<Reservation> {
    this.refuseIfClosed();
    const { registry, sessions } = this.o;
    let adapter = request.agent === undefined ? undefined : registry.check(workspace, request.agent);
    const session = request.resumeId === undefined ? undefined : await sessions.require(request.resumeId);
    if (session) adapter = this.checkSession(workspace, session, adapter);
    adapter ??= await registry.select({
      workspace,
      lastAgent: this.lastAgent.get(workspace.id),
      defaultAgent: this.o.defaultAgent,
      env: this.selectionEnv(workspace),
    });
    // From here to the reservation: no await, so no other request can pass these checks meanwhile.
    this.refuseIfClosed();
    if (session) {
      // Busy first: the agent's session id of a run in flight is only known once it has printed it.
      if (sessions.isBusy(session.resumeId)) throw new HttpProblem('session_busy', `Session "${session.resumeId}" has a run in progress.`);
      if (!sessions.isResumable(session)) throw new HttpProblem('session_not_resumable', `Session "${session.resumeId}" cannot be resumed.`);
    }
    if (this.active >= this.o.maxConcurrentRuns) {
      throw new HttpProblem('capacity_reached', `All ${this.o.maxConcurrentRuns} run slots are busy; retry later.`, {
        headers: { 'retry-after': '5' },
      });
    }

    const taskId = newSortableId('run_');
    const resumeId = session?.resumeId ?? newSortableId('ses_');
    this.active += 1;
    sessions.take(resumeId, taskId);
    let held = true;
    return {
      adapter,
      session,
      resumeId,
      taskId,
      release: () => {
        if (!held) return;
        held = false;
        this.active -= 1;
        sessions.release(resumeId, taskId);
      },
    };
  }

  /** The Session rules of a resume that need no lock; returns the adapter the run will use. */
  private checkSession(workspace: Workspace, session: SessionState, named: AgentAdapter | undefined): AgentAdapter {
    const { registry } = this.o;
    if (session.workspaceId !== workspace.id) {
      throw new HttpProblem('session_other_workspace', `Session "${session.resumeId}" belongs to another workspace.`);
    }
    if (session.retired) throw new HttpProblem('session_retired', `Session "${session.resumeId}" is retired.`);
    if (named && named.name !== session.agent) {
      throw new HttpProblem('session_not_resumable', `Session "${session.resumeId}" belongs to agent "${session.agent}".`);
    }
    return named ?? registry.check(workspace, session.agent);
  }

  private selectionEnv(workspace: Workspace): Record<string, string> {
    return probeEnv(this.o.baseEnv, workspace.env);
  }

  /** Records the workspace's most recent headless agent; a failed write is logged, never thrown. */
  rememberAgent(workspaceId: string, agent: string): void {
    if (this.lastAgent.get(workspaceId) === agent) return;
    this.lastAgent.set(workspaceId, agent);
    this.o.store.set(lastAgentKey(workspaceId), { workspaceId, lastAgent: agent }).catch((error: unknown) => {
      this.o.log('could not record the most recent headless agent', error);
    });
  }

  private refuseIfClosed(): void {
    if (this.closed) throw new HttpProblem('shutting_down', 'The service is shutting down.');
  }
}
