/**
 * @module The durable questions of runs under `permissions: "ask"` (docs/approvals.md). A
 * question is stored `pending` before anyone is told of it; its answer (a caller's, or the
 * fallback when its time runs out) is ONE compare-and-set from `pending`, so exactly one answer
 * counts, on any instance. The instance whose run asked waits for it: told at once when it was
 * answered here, asked through the fleet when elsewhere, and its timer reads the stored answer
 * before it applies the fallback.
 */
import type { ApprovalAnswer, ApprovalPolicy, ApprovalRecord } from '../../contract/records';
import type { PermissionQuestion } from '../agents/types';
import type { Fleet } from '../fleet/fleet';
import type { Log } from '../logger';
import type { RecordTable, HeadlessStore } from '../store/headless-store';
import { newSortableId } from '../util/ids';
import { shownTool } from './shown-request';

/** An approval as stored: with the instance whose run waits for it. */
export interface StoredApproval extends ApprovalRecord {
  bootId: string;
}

/** Why an answer was not taken; the HTTP edge turns it into a problem. */
export type AnswerRefusal = { refused: 'not_found' } | { refused: 'answered'; approval: ApprovalRecord };

export interface ApprovalsResources {
  store: HeadlessStore;
  fleet: Fleet;
  instanceId: string;
  log: Log;
}

interface Waiter {
  settle(answer: ApprovalAnswer | undefined): void;
  timer: NodeJS.Timeout;
}

/** The run a question is asked for. */
export interface AskingRun {
  taskId: string;
  resumeId: string;
  workspaceId: string;
  agent: string;
}

export const publicApproval = ({ bootId: _owner, ...approval }: StoredApproval): ApprovalRecord => approval;

export class Approvals {
  private readonly table: RecordTable<StoredApproval>;
  private readonly waiters = new Map<string, Waiter>();

  constructor(private readonly $: ApprovalsResources) {
    this.table = $.store.table<StoredApproval>({ name: 'approvals', group: 'workspaceId', bucket: { field: 'status' }, owner: 'bootId' });
  }

  load(): Promise<void> {
    return this.table.load();
  }

  /** Stores the run's question, pending: nobody is told of it before it is durable. */
  async open(run: AskingRun, question: PermissionQuestion, policy: ApprovalPolicy): Promise<StoredApproval> {
    const now = Date.now();
    const approval: StoredApproval = {
      id: newSortableId('apr_'),
      ...run,
      status: 'pending',
      tool: shownTool(question),
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + policy.timeoutMs).toISOString(),
      fallback: policy.fallback,
      answer: null,
      bootId: this.$.instanceId,
    };
    await this.table.put(approval.id, approval);
    return approval;
  }

  /**
   * Settles with its answer: a caller's, or its fallback once it expires. Undefined when the run
   * ended first (`abandon`): the agent is gone, nobody needs an answer. The stored answer is read
   * once the waiter is in place: one given between `open` and here (the question is listed as soon
   * as it is stored) found no waiter to wake, and would otherwise wait for the question's expiry.
   */
  async wait(approval: StoredApproval): Promise<ApprovalAnswer | undefined> {
    const answered = new Promise<ApprovalAnswer | undefined>((resolve) => {
      const delay = Math.max(0, Date.parse(approval.expiresAt) - Date.now());
      const timer = setTimeout(() => void this.expire(approval), delay);
      this.waiters.set(approval.id, {
        timer,
        settle: (answer) => {
          clearTimeout(timer);
          this.waiters.delete(approval.id);
          resolve(answer);
        },
      });
    });
    await this.rewake(approval.id);
    return answered;
  }

  /** Its time ran out: the fallback, unless a caller's answer was stored first. */
  private async expire(approval: StoredApproval): Promise<void> {
    const answer: ApprovalAnswer = { decision: approval.fallback, scope: 'once', by: 'fallback', at: new Date().toISOString() };
    try {
      const taken = await this.settle(approval, answer);
      this.waiters.get(approval.id)?.settle('approval' in taken ? (taken.approval.answer ?? undefined) : answer);
    } catch (error) {
      // The store refused: the agent still gets its fallback; the record stays pending until a start-up sweep.
      this.$.log(`could not store the fallback answer of ${approval.id}`, error);
      this.waiters.get(approval.id)?.settle(answer);
    }
  }

  /** A caller's answer: stored, then the instance whose run waits is told. */
  async answer(id: string, given: Pick<ApprovalAnswer, 'decision' | 'scope'>): Promise<ApprovalRecord | AnswerRefusal> {
    const stored = await this.table.get(id);
    if (!stored) return { refused: 'not_found' };
    const answer: ApprovalAnswer = { ...given, by: 'caller', at: new Date().toISOString() };
    const taken = await this.settle(stored, answer);
    if ('refused' in taken) return taken;
    await this.tell(stored.bootId, id);
    return publicApproval(taken);
  }

  /** The one write of its answer, from `pending`; refused when it was answered (or ended) first. */
  private async settle(approval: StoredApproval, answer: ApprovalAnswer): Promise<StoredApproval | { refused: 'answered'; approval: ApprovalRecord }> {
    const current = (await this.table.get(approval.id)) ?? approval;
    if (current.status !== 'pending') return { refused: 'answered', approval: publicApproval(current) };
    const answered: StoredApproval = { ...current, status: answer.decision === 'allow' ? 'allowed' : 'denied', answer };
    if (await this.table.putIf(approval.id, answered, { bucket: 'pending', owner: current.bootId })) return answered;
    const now = await this.table.get(approval.id);
    return { refused: 'answered', approval: publicApproval(now ?? current) };
  }

  /** Tells the waiting instance its question was answered. */
  private async tell(owner: string, id: string): Promise<void> {
    if (owner === this.$.instanceId) return this.wake(id);
    const told = await this.$.fleet.ask(owner, { op: 'approval', id });
    // Not told: its timer reads the stored answer when the question expires.
    if (!told.ok) this.$.log(`could not tell instance ${owner} that ${id} was answered: ${told.message}`);
  }

  /** A question this instance waits on was answered: its stored answer goes to its run. */
  async wake(id: string): Promise<void> {
    const waiter = this.waiters.get(id);
    if (!waiter) return;
    const stored = await this.table.get(id);
    if (stored?.answer) waiter.settle(stored.answer);
  }

  /** Every question this instance waits on, read again: an answer whose telling was lost (the fleet's listener was cut) goes to its run now. */
  async wakeAll(): Promise<void> {
    for (const id of [...this.waiters.keys()]) await this.rewake(id);
  }

  /** `wake` where nobody asked: a store that refuses the read leaves the question to its timer. */
  private rewake(id: string): Promise<void> {
    return this.wake(id).catch((error: unknown) => this.$.log(`could not read the answer of ${id}; its timer will`, error));
  }

  /** Its run ended while it waited (`interrupted`: with the service): nobody waits any more. */
  async abandon(approval: StoredApproval, status: 'abandoned' | 'interrupted'): Promise<void> {
    this.waiters.get(approval.id)?.settle(undefined);
    const current = await this.table.get(approval.id);
    if (current?.status !== 'pending') return;
    await this.table.putIf(approval.id, { ...current, status }, { bucket: 'pending', owner: current.bootId });
  }

  /** Questions whose instance is gone (a crash, a lost lease) are `interrupted`: their runs were. */
  async takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> {
    const pending = await this.table.getMany(await this.table.inBucket('pending'));
    for (const approval of pending) {
      if (!approval || approval.bootId === this.$.instanceId || !(await isGone(approval.bootId))) continue;
      await this.table.putIf(approval.id, { ...approval, status: 'interrupted' }, { bucket: 'pending', owner: approval.bootId });
    }
  }

  async get(id: string): Promise<ApprovalRecord | undefined> {
    const stored = await this.table.get(id);
    return stored && publicApproval(stored);
  }

  /**
   * Newest first: a workspace's (in one status, if asked), or every pending one. A run's are its
   * workspace's, filtered, so a page may hold fewer than `limit`; `nextCursor` goes on.
   */
  async list(filter: { workspaceId?: string; taskId?: string; status?: ApprovalRecord['status']; limit: number; cursor?: string }) {
    const { workspaceId, taskId, status, limit, cursor } = filter;
    const page = workspaceId === undefined ? await this.pendingPage(limit, cursor) : await this.table.page(workspaceId, status, limit, cursor);
    const found = await this.table.getMany(page.ids);
    const approvals = found
      .filter((a): a is StoredApproval => a !== undefined)
      .filter((a) => (taskId === undefined || a.taskId === taskId) && (status === undefined || a.status === status))
      .map(publicApproval);
    return { approvals, nextCursor: page.next };
  }

  /** Every pending question, newest first: as many as runs wait, so read from its bucket. */
  private async pendingPage(limit: number, cursor?: string): Promise<{ ids: string[]; next: string | null }> {
    const all = (await this.table.inBucket('pending')).sort().reverse();
    const after = all.filter((id) => cursor === undefined || id < cursor);
    const ids = after.slice(0, limit);
    return { ids, next: after.length > limit ? (ids.at(-1) ?? null) : null };
  }

  /** Deletes up to `limit` of those created before `bound` (a sortable id bound); returns how many. */
  async prune(bound: string, limit: number): Promise<number> {
    const old = await this.table.oldest(bound, limit);
    for (const id of old) await this.table.delete(id);
    return old.length;
  }
}
