/**
 * @module The run's state machine: every status a run can have and every transition between
 * them, each named, with its guard and the record it makes. Pure: the lifecycle (lifecycle.ts)
 * applies each one as ONE write of the record (a compare-and-set where the store is shared), and
 * nothing else changes a run's status. docs/internals.md draws it.
 */
import type { ApprovalRecord, RunApprovals, RunError, RunStatus, RunVerify } from '../../contract/records';
import { owe, sameDelivery, withDeliveries } from '../delivery/outbox';
import type { Delivery, StoredRun, WebhookTarget } from '../types';

/** The statuses a run can end in, by the way it ends. */
export type FinishStatus = 'succeeded' | 'failed' | 'cancelled' | 'timed_out' | 'interrupted';
export type QueuedEnding = 'cancelled' | 'expired';

/** Every final status: a transition from one keeps it (test/unit/transitions.test.ts). */
const FINAL = ['succeeded', 'failed', 'timed_out', 'cancelled', 'interrupted', 'expired'] as const;

/**
 * Every transition: from which statuses (none: it makes a new record) to which. A `running` run
 * also has an owner (the instance that runs it, `bootId`): the transitions of a running run are
 * refused to any other, so an instance that was cut off can no longer write over a take-over.
 */
export const TRANSITIONS = {
  /** A start admitted at once: its new record. */
  accept: { from: [], to: ['running'], owned: false },
  /** A start that waits for a slot: its new record, holding what starting it needs. */
  enqueue: { from: [], to: ['queued'], owned: false },
  /** An instance takes a queued run to start it; the prompt leaves the record. */
  take: { from: ['queued'], to: ['running'], owned: false },
  /** A queued run ends without ever starting. */
  endQueued: { from: ['queued'], to: ['cancelled', 'expired', 'failed'], owned: false },
  /** Where its process runs (pid, start time, machine) and where it was placed. */
  recordProcess: { from: ['running'], to: ['running'], owned: true },
  /** The agent printed its session id; the `agent.session` webhooks are owed. */
  noteSession: { from: ['running'], to: ['running'], owned: true },
  /** The agent asked for a permission, or was answered: its `approvals`, and a question's `permission.requested` webhooks. */
  noteApprovals: { from: ['running'], to: ['running'], owned: true },
  /** Between its turns, what a turn policy found (its verify loop's attempts). */
  noteTurn: { from: ['running'], to: ['running'], owned: true },
  /** Its process ended, or never started: the final record, judged. */
  finish: { from: ['running'], to: ['succeeded', 'failed', 'cancelled', 'timed_out', 'interrupted'], owned: true },
  /** Another instance becomes its owner (its own is gone), before it is interrupted. */
  claim: { from: ['running'], to: ['running'], owned: true },
  /** Its owner is gone (a crash, a lost lease): ended, never re-run. */
  interrupt: { from: ['running'], to: ['interrupted'], owned: true },
  /** Its owner is gone with deliveries still owed: another instance becomes its owner to deliver them (the dispatcher's take-over). */
  claimEnded: { from: FINAL, to: FINAL, owned: true },
  /** A delivery was attempted: its new state in the outbox, written by the instance that delivers it. */
  settleDelivery: { from: ['running', ...FINAL], to: ['running', ...FINAL], owned: true },
} as const satisfies Record<string, { from: readonly RunStatus[]; to: readonly RunStatus[]; owned: boolean }>;

export type TransitionName = keyof typeof TRANSITIONS;

/** Whether `run` may make transition `name`, asked by (or on behalf of) owner `owner`. */
export function can(name: TransitionName, run: StoredRun, owner?: string): boolean {
  const t = TRANSITIONS[name];
  return (t.from as readonly RunStatus[]).includes(run.status) && (!t.owned || run.bootId === owner);
}

/** The error of a run interrupted by the service's end or an owner's loss. */
export const INTERRUPTED: RunError = {
  code: 'interrupted',
  message: 'The service stopped while the run was running; it was not re-run.',
};

const QUEUED_ENDINGS = {
  cancelled: { code: 'cancelled', message: 'Cancelled while queued; its agent never started.' },
  expired: { code: 'expired', message: 'Still queued when its time in the queue ran out; its agent never started.' },
} as const;

/** What the agent and the process said at the end, beyond the status (finish only). */
export interface FinishFields {
  status: FinishStatus;
  error?: RunError;
  exitCode: number | null;
  signal: string | null;
  usage?: StoredRun['usage'];
  lastMessage?: string;
  /** Where it was placed, for a run whose process never started (else recorded with its process). */
  placement?: StoredRun['placement'];
  /** What it changed in its worktree. */
  changes?: StoredRun['changes'];
  /** Its answer, matching its `outputSchema`. */
  result?: unknown;
  /** What it was asked and answered, nothing pending any more. */
  approvals?: StoredRun['approvals'];
  /** What became of its publishing (worktrees/publish.ts). */
  publish?: StoredRun['publish'];
}

/**
 * The final record: computed here once for every way a run ends. It owes the `run.ended`
 * webhooks in the same record, and names `owner` as the instance that delivers them.
 */
export function endedRecord(run: StoredRun, end: { status: RunStatus; error?: RunError; owner: string; at: Date }, more: object = {}): StoredRun {
  const { queued: _queued, ...rest } = run;
  const endedAt = end.at.toISOString();
  const final: StoredRun = {
    ...rest,
    ...more,
    status: end.status,
    endedAt,
    durationMs: Math.max(0, end.at.getTime() - Date.parse(run.createdAt)),
    ...(end.error ? { error: end.error } : {}),
    bootId: end.owner,
  };
  return owe(final, 'run.ended', endedAt);
}

/** A change of one record: the next record, or undefined when the transition is refused. */
export type Change = (run: StoredRun) => StoredRun | undefined;

/** What a turn policy may note on a running run's record (runs/turn-policy.ts `TurnContext.note`). */
export interface TurnNotes {
  verify?: RunVerify;
}

/** Each transition of a stored run as a change: its guard, then the record it makes. */
export const change = {
  take(instanceId: string, at: Date, workspaceTargets?: WebhookTarget[]): Change {
    return (r) => {
      if (!can('take', r)) return undefined;
      const { queued: _queued, ...rest } = r;
      const taken: StoredRun = { ...rest, status: 'running', bootId: instanceId, startedAt: at.toISOString() };
      if (!workspaceTargets) return taken;
      // The start's own targets stay; the workspace's are the taker's.
      const targets = [...(r.webhookTargets ?? []).filter((t) => t.source !== 'workspace'), ...workspaceTargets];
      return { ...taken, webhookTargets: targets };
    };
  },
  endQueued(ending: QueuedEnding | { status: 'failed'; error: RunError }, instanceId: string, at: Date): Change {
    const { status, error } = typeof ending === 'string' ? { status: ending, error: QUEUED_ENDINGS[ending] } : ending;
    return (r) => (can('endQueued', r) ? endedRecord(r, { status, error, owner: instanceId, at }) : undefined);
  },
  recordProcess(owner: string, fields: Pick<StoredRun, 'process' | 'placement'>): Change {
    return (r) => (can('recordProcess', r, owner) ? { ...r, ...fields } : undefined);
  },
  noteSession(owner: string, agentSessionId: string, at: string): Change {
    return (r) => (can('noteSession', r, owner) ? owe({ ...r, agentSessionId }, 'agent.session', at) : undefined);
  },
  noteApprovals(owner: string, approvals: RunApprovals, asked?: ApprovalRecord): Change {
    return (r) => {
      if (!can('noteApprovals', r, owner)) return undefined;
      const next = { ...r, approvals };
      return asked ? owe(next, 'permission.requested', asked.createdAt, asked) : next;
    };
  },
  noteTurn(owner: string, notes: TurnNotes): Change {
    return (r) => (can('noteTurn', r, owner) ? { ...r, ...notes } : undefined);
  },
  finish(owner: string, fields: FinishFields, at: Date): Change {
    const { status, error, ...more } = fields;
    return (r) => (can('finish', r, owner) ? endedRecord(r, { status, error, owner, at }, more) : undefined);
  },
  claim(gone: string, instanceId: string): Change {
    return (r) => (can('claim', r, gone) ? { ...r, bootId: instanceId } : undefined);
  },
  interrupt(owner: string, instanceId: string, at: Date, settled: { changes?: StoredRun['changes']; approvals?: RunApprovals } = {}): Change {
    const more = { ...(settled.changes ? { changes: settled.changes } : {}), ...(settled.approvals ? { approvals: settled.approvals } : {}) };
    return (r) => (can('interrupt', r, owner) ? endedRecord(r, { status: 'interrupted', error: INTERRUPTED, owner: instanceId, at }, more) : undefined);
  },
  claimEnded(gone: string, instanceId: string): Change {
    return (r) => (can('claimEnded', r, gone) ? { ...r, bootId: instanceId } : undefined);
  },
  settleDelivery(owner: string, settled: Delivery): Change {
    return (r) =>
      can('settleDelivery', r, owner)
        ? withDeliveries(
            r,
            (r.deliveries ?? []).map((d) => (sameDelivery(d, settled) ? settled : d)),
          )
        : undefined;
  },
};
