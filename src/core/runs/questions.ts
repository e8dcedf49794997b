/**
 * @module One run's permission questions (docs/approvals.md): its policy answers what it can (its
 * permissions, its rules, an answer given for the run); any other is a durable question a caller
 * answers, shown on the run's timeline and record and told to its `permission.requested`
 * webhooks, while its stall guard waits too. Its fallback answers it when its time runs out.
 */
import type { ApprovalAnswer, ApprovalRecord, RunApprovals } from '../../contract/records';
import type { PermissionDecision, PermissionQuestion } from '../agents/types';
import { answerByPolicy } from '../approvals/approval-policy';
import type { Approvals, StoredApproval } from '../approvals/approvals';
import { publicApproval } from '../approvals/approvals';
import { shownTool } from '../approvals/shown-request';
import type { RunEvents } from '../events/run-events';
import type { Log } from '../logger';
import type { StoredRun } from '../types';

export interface QuestionsResources {
  approvals: Approvals;
  /** The lifecycle's running → running write of what the run was asked (lifecycle.ts `noteApprovals`). */
  noteApprovals(taskId: string, owner: string, approvals: RunApprovals, asked?: ApprovalRecord): Promise<void>;
  events: RunEvents;
  log: Log;
  instanceId: string;
}

/** The record's summary before any question. */
const NONE: RunApprovals = { asked: 0, allowed: 0, denied: 0, timedOut: 0, pending: [] };

export class RunQuestions {
  private summary: RunApprovals = { ...NONE, pending: [] };
  /** Answers given for the rest of the run, by kind of tool. */
  private readonly remembered = new Map<string, boolean>();
  private readonly open = new Map<string, StoredApproval>();
  /** How many questions wait now: the stall guard waits while any does. */
  private waitingOn = 0;
  private readonly waitingListeners: Array<(waiting: boolean) => void> = [];

  constructor(
    private readonly $: QuestionsResources,
    private readonly run: { record: StoredRun; cwd: string },
  ) {}

  /** Calls `listener` when the run starts and stops waiting on a caller (its guards pause). */
  onWaiting(listener: (waiting: boolean) => void): void {
    this.waitingListeners.push(listener);
  }

  /** The answer to one question. */
  async ask(question: PermissionQuestion): Promise<PermissionDecision> {
    const { record, cwd } = this.run;
    // A request shown cut is answered by a caller (or the fallback): no rule, no earlier "always" allows what nobody saw.
    const truncated = shownTool(question).truncated === true;
    const byPolicy = answerByPolicy(record.policy, question, cwd, truncated);
    if (byPolicy !== 'ask') return { allow: byPolicy === 'allow', always: false };
    const remembered = question.kind === undefined ? undefined : this.remembered.get(question.kind);
    if (remembered !== undefined && !(truncated && remembered)) return { allow: remembered, always: false };
    const policy = record.policy?.approvals;
    if (!policy) return { allow: false, always: false };
    const { taskId, resumeId, workspaceId, agent } = record;
    let approval: StoredApproval;
    try {
      approval = await this.$.approvals.open({ taskId, resumeId, workspaceId, agent }, question, policy);
    } catch (error) {
      // A question nobody could see would wait for nothing: refused, as the safe answer.
      this.$.log(`could not store a question of ${taskId}; the agent is refused`, error);
      this.$.events.append(taskId, 'error', { message: 'A permission the agent asked for was refused: the question could not be stored.' });
      return { allow: false, always: false };
    }
    this.open.set(approval.id, approval);
    this.pause(1);
    try {
      this.summary = { ...this.summary, asked: this.summary.asked + 1, pending: [...this.summary.pending, approval.id] };
      this.$.events.append(taskId, 'permission.requested', publicApproval(approval));
      await this.note(publicApproval(approval));
      const answer = await this.$.approvals.wait(approval);
      if (answer === undefined) return { allow: false, always: false };
      return await this.answered(approval, answer);
    } finally {
      this.open.delete(approval.id);
      this.pause(-1);
    }
  }

  /** Its answer: on the timeline and the record, remembered when it was given for the run. */
  private async answered(approval: StoredApproval, answer: ApprovalAnswer): Promise<PermissionDecision> {
    const allow = answer.decision === 'allow';
    if (answer.scope === 'run' && approval.tool.kind !== undefined) this.remembered.set(approval.tool.kind, allow);
    const s = this.summary;
    this.summary = {
      asked: s.asked,
      allowed: s.allowed + (allow ? 1 : 0),
      denied: s.denied + (allow ? 0 : 1),
      timedOut: s.timedOut + (answer.by === 'fallback' ? 1 : 0),
      pending: s.pending.filter((id) => id !== approval.id),
    };
    this.$.events.append(approval.taskId, 'permission.answered', { id: approval.id, ...answer });
    await this.note();
    return { allow, always: answer.scope === 'run' };
  }

  /** The record's `approvals`, and the webhooks a new question owes. Not stored: the question still goes on. */
  private async note(asked?: ApprovalRecord): Promise<void> {
    const { taskId } = this.run.record;
    await this.$.noteApprovals(taskId, this.$.instanceId, this.summary, asked).catch((error: unknown) =>
      this.$.log(`could not record the questions of ${taskId}`, error),
    );
  }

  /**
   * The run waits on the service itself (its turn policies deciding, a check running, while its
   * ACP session stays open): its stall guard pauses as for a question. Returns the release.
   */
  hold(): () => void {
    this.pause(1);
    let released = false;
    return () => {
      if (!released) this.pause(-1);
      released = true;
    };
  }

  private pause(delta: number): void {
    const was = this.waitingOn > 0;
    this.waitingOn += delta;
    if (was === this.waitingOn > 0) return;
    for (const listener of this.waitingListeners) listener(this.waitingOn > 0);
  }

  /** What the final record shows: nothing waits any more. */
  final(): RunApprovals | undefined {
    return this.summary.asked === 0 ? undefined : { ...this.summary, pending: [] };
  }

  /** The run ended: the questions it still waits on end with it. */
  async abandon(status: 'abandoned' | 'interrupted'): Promise<void> {
    for (const approval of this.open.values()) {
      await this.$.approvals.abandon(approval, status).catch((error: unknown) => this.$.log(`could not abandon ${approval.id}`, error));
    }
  }
}
