/** A run's events, as the API streams and pages them (docs/http-api.md: Follow a run). */
import type { ApprovalAnswer, ApprovalRecord, CheckResult, RunEventType, RunRecord, RunUsage, RunVerify } from './records';

export interface RunEventData {
  /** Accepted into the queue: it starts when a slot (and its Session) is free. */
  'run.queued': Pick<RunRecord, 'taskId' | 'resumeId' | 'workspaceId' | 'agent' | 'mode' | 'title' | 'metadata' | 'schedule'> & { expiresAt: string };
  'run.started': Pick<RunRecord, 'taskId' | 'resumeId' | 'workspaceId' | 'agent' | 'mode' | 'title' | 'metadata' | 'schedule'>;
  /** The Session can now be resumed. The agent's own session id is never shown. */
  'agent.session': { resumeId: string };
  message: { text: string };
  tool: { name: string; status: 'started' | 'succeeded' | 'failed'; id?: string };
  usage: RunUsage;
  error: { message: string };
  /** The agent asks for a permission a caller answers (docs/approvals.md). */
  'permission.requested': ApprovalRecord;
  'permission.answered': { id: string } & ApprovalAnswer;
  /** A delivery of the trigger that started it said its incident is over (docs/triggers.md: Resolved). */
  'trigger.resolved': { trigger: string; delivery: string; event?: string; cancelled: boolean };
  /** A caller's follow-up (docs/http-api.md: Follow-ups): taken, then given to the agent as its next turn's prompt. Its text is not shown, as a prompt is not. */
  'follow-up': { id: string; state: 'queued' | 'delivered' | 'dropped'; chars: number };
  /** A check of its verify loop ran (docs/verify.md). */
  'verify.checked': { attempt: number } & Omit<CheckResult, 'output'>;
  /** Its checks' verdict after an attempt: `pending` while another turn is asked for. */
  'verify.verdict': { attempt: number; verdict: RunVerify['verdict']; failing: string[] };
  /** The final record. */
  'run.ended': RunRecord;
}

/** One event: `seq` counts from 1 within its run. */
export type RunEvent = {
  [T in RunEventType]: { seq: number; time: string; type: T; data: RunEventData[T] };
}[RunEventType];

/** What is read from a timeline at once: events after a sequence number, and whether more can come. */
export interface EventPage {
  events: RunEvent[];
  /** No event will follow these: the run has ended (or its timeline is not followed here). */
  ended: boolean;
}
