import type { AgentRule } from '../../contract/records';
import { freemem } from 'node:os';
import type { AgentRegistry } from '../agents/registry';
import { probeEnv } from '../agents/preflight';
import type { AgentAdapter } from '../agents/types';
import { newSortableId } from '../util/ids';
import { Refusal } from '../../contract/problems';
import type { SessionBook } from '../sessions';
import type { HeadlessStore } from '../store/keyv-store';
import type { SessionState, SlotShare, Workspace } from '../types';

const lastAgentKey = (workspaceId: string) => `workspace:${workspaceId}`;

/** Something admission holds for a run: its Session claim, or its capacity slot. */
export interface Held {
  /** Only the first call counts. */
  release(): Promise<void>;
}

/**
 * An admitted run: its Session claim and its capacity slot, held apart (a queued run would hold
 * its Session without a slot), both until `release`.
 */
export interface Reservation {
  adapter: AgentAdapter;
  /** Which rule chose its agent (a queued run's is on its record already). */
  chosenBy?: AgentRule;
  /** The Session being resumed; absent when the run starts a new one. */
  session?: SessionState;
  resumeId: string;
  taskId: string;
  claim: Held;
  slot: Held;
  /** Frees the slot, then the Session. Settles when the Session is free. */
  release(): Promise<void>;
}

/**
 * What admission decided: the run is admitted (start it), or it must wait for a slot or for its
 * Session (queue it where a queue is configured, else refuse it with `problem`). Refusals that
 * no wait can mend (no such Session, a retired one, ...) are thrown.
 */
/** What a start asked of admission: an agent by name, a Session to resume (neither: the workspace's selection, a new Session). */
export interface AgentAsk {
  agent?: string;
  resumeId?: string;
  /** It may need more turns on its session (a verify loop): an agent that can have none is refused. */
  continues?: boolean;
}

/** Another turn can be had on its session: it resumes one headless, or its protocol asks for the next prompt on the open one. */
export const canContinue = (adapter: AgentAdapter): boolean => adapter.supportsResume || adapter.protocol?.continues === true;

/** The agent a start runs, which rule chose it, and the Session it resumes. */
export interface Planned {
  adapter: AgentAdapter;
  chosenBy: AgentRule;
  known?: SessionState;
}

export type AdmissionDecision = { admitted: Reservation } | { wait: 'capacity' | 'session'; problem: Refusal };

const waitForSlot = (max: number): AdmissionDecision => ({
  wait: 'capacity',
  problem: new Refusal('capacity_reached', `All ${max} run slots are busy; retry later.`, { retryAfterSeconds: 5 }),
});
const waitForShare = (share: SlotShare): AdmissionDecision => ({
  wait: 'capacity',
  problem: new Refusal('capacity_reached', `${share.key} has ${share.running} runs running, all of its share; retry later.`, { retryAfterSeconds: 5 }),
});
const waitForMemory = (freeMb: number, floorMb: number): AdmissionDecision => ({
  wait: 'capacity',
  problem: new Refusal('capacity_reached', `Only ${freeMb} MB of memory is available, below the floor of ${floorMb} MB; retry later.`, {
    retryAfterSeconds: 5,
  }),
});
const waitForSession = (resumeId: string): AdmissionDecision => ({
  wait: 'session',
  problem: new Refusal('session_busy', `Session "${resumeId}" has a run in progress.`),
});

export interface AdmissionOptions {
  registry: AgentRegistry;
  sessions: SessionBook;
  store: HeadlessStore;
  maxConcurrentRuns: number;
  /** Below this much available memory, no run starts: it waits as for a slot. */
  minFreeMemoryMb?: number;
  /** Available memory now, in MB. @default the operating system's (`MemAvailable`) */
  freeMemoryMb?: () => number;
  /** Other instances share the store: the most recent agent is read from it, not remembered. */
  shared?: boolean;
  defaultAgent?: string;
  /** The environment runs start from: selection only takes agents found on its (or the workspace's) `PATH`. */
  baseEnv: NodeJS.ProcessEnv;
  /** For a workspace that runs on another member of a fleet: the agents installed there (what it advertised). */
  installedElsewhere?: (workspace: Workspace) => readonly string[] | undefined;
  log: (message: string, error?: unknown) => void;
}

/**
 * Admission of a run: the agent choice, the Session rules and host capacity, in the documented
 * order. A resumed Session is claimed atomically (across instances too) before its rules are
 * checked on its latest state; the capacity check and the taking of a slot happen in one tick,
 * so two requests can never both pass a check that only one may pass.
 */
export class Admission {
  private active = 0;
  /** Each source's runs holding a slot here: none takes more than its share. */
  private readonly bySource = new Map<string, number>();
  private closed = false;
  private readonly lastAgent = new Map<string, string>();
  private readonly freed: Array<() => void> = [];

  constructor(private readonly o: AdmissionOptions) {}

  /** Runs holding a slot now. */
  get running(): number {
    return this.active;
  }

  async loadLastAgents(): Promise<void> {
    if (this.o.shared) return;
    for await (const [, meta] of this.o.store.scan<{ workspaceId: string; lastAgent: string }>('workspace:')) {
      this.lastAgent.set(meta.workspaceId, meta.lastAgent);
    }
  }

  /** From now on every start is refused with 503 shutting_down. */
  close(): void {
    this.closed = true;
  }

  /** Run slots in all. */
  get slots(): number {
    return this.o.maxConcurrentRuns;
  }

  /** Slots free now. */
  get free(): number {
    return this.o.maxConcurrentRuns - this.active;
  }

  /** Calls `listener` each time a slot frees. */
  onFree(listener: () => void): void {
    this.freed.push(listener);
  }

  /** The agent a start runs and the Session it resumes, by the documented rules; nothing is held. */
  async plan(workspace: Workspace, request: AgentAsk): Promise<Planned> {
    this.refuseIfClosed();
    const { registry, sessions } = this.o;
    const asked = request.agent === undefined ? undefined : registry.check(workspace, request.agent);
    const known = request.resumeId === undefined ? undefined : await sessions.require(request.resumeId);
    const { adapter, chosenBy } = known
      ? { adapter: this.checkSession(workspace, known, asked), chosenBy: 'session' as const }
      : asked
        ? { adapter: asked, chosenBy: 'asked' as const }
        : await registry.select({
            workspace,
            lastAgent: this.o.shared
              ? (await this.o.store.get<{ lastAgent: string }>(lastAgentKey(workspace.id)))?.lastAgent
              : this.lastAgent.get(workspace.id),
            defaultAgent: this.o.defaultAgent,
            env: this.selectionEnv(workspace),
            installed: this.o.installedElsewhere?.(workspace),
          });
    if (request.continues && !canContinue(adapter)) {
      const can = this.o.registry
        .names()
        .filter((name) => this.o.registry.isEnabled(workspace, name) && canContinue(this.o.registry.get(name) as AgentAdapter));
      throw new Refusal(
        'verify_unsupported',
        `${adapter.name} cannot be asked again on its session headless, so it cannot run a verify loop; agents here that can: ${can.join(', ') || 'none'}.`,
      );
    }
    this.refuseIfClosed();
    return { adapter, chosenBy, ...(known ? { known } : {}) };
  }

  /**
   * Admits a run, or says what it waits for; `plannedTaskId` is the id an idempotent start planned
   * for it; `share`: its source's runs at once, past which it waits as for a slot.
   */
  async admit(workspace: Workspace, request: AgentAsk, plannedTaskId?: string, share?: SlotShare): Promise<AdmissionDecision> {
    const { adapter, known, chosenBy } = await this.plan(workspace, request);
    const taskId = plannedTaskId ?? newSortableId('run_');
    const claimed = await this.claimSession(workspace, known, adapter, taskId);
    if (!claimed) return waitForSession(known?.resumeId ?? '');
    const decision = await this.reserve({ adapter, session: claimed.session, resumeId: claimed.resumeId, taskId, claim: claimed.claim, share });
    return 'admitted' in decision ? { admitted: { ...decision.admitted, chosenBy } } : decision;
  }

  /**
   * Admits a queued run leaving the queue: its Session (a resumed one checked again: it may have
   * been retired meanwhile), then a slot. Throws a problem when it can never start.
   */
  async admitQueued(
    workspace: Workspace,
    run: { agent: string; resumeId: string; taskId: string; resumes: boolean; share?: SlotShare },
  ): Promise<AdmissionDecision> {
    this.refuseIfClosed();
    const adapter = this.o.registry.check(workspace, run.agent);
    const { sessions } = this.o;
    const known = run.resumes ? await sessions.require(run.resumeId) : undefined;
    if (!known && !(await sessions.take(run.resumeId, run.taskId))) return waitForSession(run.resumeId);
    const claimed = known ? await this.claimSession(workspace, known, adapter, run.taskId) : undefined;
    if (known && !claimed) return waitForSession(run.resumeId);
    const claim = claimed?.claim ?? once(() => sessions.release(run.resumeId, run.taskId));
    return this.reserve({ adapter, session: claimed?.session, resumeId: run.resumeId, taskId: run.taskId, claim, share: run.share });
  }

  /** Takes a slot (within its source's share) for a run whose Session is held; without one, the Session is let go. */
  private async reserve(r: {
    adapter: AgentAdapter;
    session: SessionState | undefined;
    resumeId: string;
    taskId: string;
    claim: Held;
    share: SlotShare | undefined;
  }): Promise<AdmissionDecision> {
    const { adapter, session, resumeId, taskId, claim, share } = r;
    const low = this.lowOnMemory();
    const slot = low === undefined ? this.takeSlot(share) : 'memory';
    if (typeof slot === 'string') {
      await claim.release();
      if (slot === 'share' && share) return waitForShare(share);
      return low === undefined ? waitForSlot(this.o.maxConcurrentRuns) : waitForMemory(low, this.o.minFreeMemoryMb ?? 0);
    }
    const admitted: Reservation = {
      adapter,
      session,
      resumeId,
      taskId,
      claim,
      slot,
      release: async () => {
        await slot.release();
        await claim.release();
      },
    };
    return { admitted };
  }

  /** Claims the Session the run resumes (checked again on its latest state once held), or a new one; undefined while it is busy. */
  private async claimSession(workspace: Workspace, known: SessionState | undefined, adapter: AgentAdapter, taskId: string) {
    const { sessions } = this.o;
    const resumeId = known?.resumeId ?? newSortableId('ses_');
    let session: SessionState | undefined;
    if (known) {
      // Busy first: the agent's session id of a run in flight is only known once it has printed it.
      if (!(await sessions.take(resumeId, taskId))) return undefined;
      try {
        // Read again now that it is held: a run that just ended may have changed it.
        session = await sessions.require(resumeId);
        this.checkSession(workspace, session, adapter);
        if (!sessions.isResumable(session)) throw new Refusal('session_not_resumable', `Session "${resumeId}" cannot be resumed.`);
        this.refuseIfClosed();
      } catch (error) {
        await sessions.release(resumeId, taskId);
        throw error;
      }
      // A new Session is busy with its first run as well; no one else can hold its new id.
    } else await sessions.take(resumeId, taskId);
    return { resumeId, session, claim: once(() => sessions.release(resumeId, taskId)) };
  }

  /** The available memory in MB when it is below the floor; undefined when there is enough (or no floor). */
  private lowOnMemory(): number | undefined {
    const floor = this.o.minFreeMemoryMb;
    if (floor === undefined) return undefined;
    const free = (this.o.freeMemoryMb ?? (() => freemem() / 1024 / 1024))();
    return free < floor ? Math.floor(free) : undefined;
  }

  /**
   * A capacity slot, or why none: every slot is busy, or the source's share is. From the check to
   * taking it: no await, so no other request can pass it meanwhile.
   */
  private takeSlot(share: SlotShare | undefined): Held | 'full' | 'share' {
    if (this.active >= this.o.maxConcurrentRuns) return 'full';
    const mine = share === undefined ? 0 : (this.bySource.get(share.key) ?? 0);
    if (share !== undefined && mine >= share.running) return 'share';
    this.active += 1;
    if (share !== undefined) this.bySource.set(share.key, mine + 1);
    return once(async () => {
      this.active -= 1;
      if (share !== undefined) this.untake(share.key);
      for (const listener of this.freed) listener();
    });
  }

  private untake(key: string): void {
    const left = (this.bySource.get(key) ?? 1) - 1;
    if (left > 0) this.bySource.set(key, left);
    else this.bySource.delete(key);
  }

  /** The Session rules of a resume that need no lock; returns the adapter the run will use. */
  private checkSession(workspace: Workspace, session: SessionState, named: AgentAdapter | undefined): AgentAdapter {
    const { registry } = this.o;
    if (session.workspaceId !== workspace.id) {
      throw new Refusal('session_other_workspace', `Session "${session.resumeId}" belongs to another workspace.`);
    }
    if (session.retired) throw new Refusal('session_retired', `Session "${session.resumeId}" is retired.`);
    if (named && named.name !== session.agent) {
      throw new Refusal('session_not_resumable', `Session "${session.resumeId}" belongs to agent "${session.agent}".`);
    }
    return named ?? registry.check(workspace, session.agent);
  }

  private selectionEnv(workspace: Workspace): Record<string, string> {
    return probeEnv(this.o.baseEnv, workspace.env);
  }

  /** Records the workspace's most recent headless agent; a failed write is logged, never thrown. */
  rememberAgent(workspaceId: string, agent: string): void {
    if (!this.o.shared && this.lastAgent.get(workspaceId) === agent) return;
    this.lastAgent.set(workspaceId, agent);
    this.o.store.set(lastAgentKey(workspaceId), { workspaceId, lastAgent: agent }).catch((error: unknown) => {
      this.o.log('could not record the most recent headless agent', error);
    });
  }

  private refuseIfClosed(): void {
    if (this.closed) throw new Refusal('shutting_down', 'The service is shutting down.');
  }
}

/** Held until the first release; later ones do nothing. */
function once(release: () => Promise<void>): Held {
  let held = true;
  return {
    release: async () => {
      if (!held) return;
      held = false;
      await release();
    },
  };
}
