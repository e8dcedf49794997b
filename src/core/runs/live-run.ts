import type { Redact } from './run-secrets';
import type { RunRecord, RunStatus, RunUsage } from '../../contract/records';
import type { AgentConversation, AgentVerdict } from '../agents/types';
import type { ProcessOutput, Spawner } from '../process/spawner';
import type { PublishSettings } from '../types';
import type { Reservation } from './admission';
import type { RunStop } from './outcome';
import type { PlacedRun } from './placements';
import type { RunQuestions } from './questions';
import type { SupervisedProcess } from './supervisor';

/** A run's output tail: live while it runs, stored when it ends. */
export interface RunOutputView extends ProcessOutput {
  taskId: string;
  status: RunStatus;
  /** False when none was kept: the service died while it ran, or the store refused it. */
  retained: boolean;
}

export interface RunResult {
  record: RunRecord;
  output: ProcessOutput;
}

export interface StartedRun {
  record: RunRecord;
  /** Settles once, with the final record, when the run has ended and its record is stored; rejects with StorageError if the store refuses it. */
  done: Promise<RunResult>;
}

/** A run between admission and its durable final record. Its record is `records.current(taskId)`. */
export interface LiveRun {
  taskId: string;
  reservation: Reservation;
  /** Its exchange with the agent, once its process is being started. */
  conversation?: AgentConversation;
  /** The agent's own session id this run resumed, if it resumed one. */
  resumedFrom?: string;
  process?: SupervisedProcess;
  /** Where it was placed, once it was. */
  placed?: PlacedRun;
  /** A command the service runs beside its agent (its placement's setup, a verify check), while it runs: the run's stops stop it. */
  beside?: SupervisedProcess;
  /** Takes its secrets out of a text (runs/run-secrets.ts), where it was given any. */
  redact?: Redact;
  /** How its agent is started, once it was (its spawner, confined where its policy says, and its environment): what its checks run as. */
  confined?: { spawner: Spawner; env: Record<string, string> };
  /** The agent's verdict, once a turn ended: the last turn's, with the usage of every turn. */
  verdict?: AgentVerdict;
  /** The verdict of the turns before the one under way (runs/turn-policy.ts). */
  earlier?: AgentVerdict;
  /** The turn policies that asked for each turn after the first, in order. */
  asked: string[];
  /** The turn under way was decided when it ended, its session still open (ACP): its process's end asks no policy again. */
  turnDecided?: boolean;
  /** How it ends when its process was not stopped: a turn policy's end, the run's time up while they decided, or a stop that came between turns. */
  endedBy?: RunStop;
  /** The usage of the turns before the one under way (priced): what the budget of a later turn starts from. */
  usageBefore?: RunUsage;
  /** The tool calls its agent started so far, every turn: what the budget of a later turn starts from. */
  toolCalls: number;
  /** Aborted at its first stop: a turn policy still deciding is cut short. */
  halt: AbortController;
  /** Follow-ups a caller sent while its turn ran, for its next turn (runs/follow-up-turn.ts). */
  followUps: FollowUp[];
  /** The answer it sent with `headless-inbox result`, once one matched its schema. */
  answer?: { value: unknown };
  /** The highest usage its agent reported so far (bounded and priced): what its budget and final record count. */
  usage?: RunUsage;
  /** Its permission questions (docs/approvals.md), once its agent is being started. */
  questions?: RunQuestions;
  /** A stop asked for while no process was running (being spawned, or between turns); applied once one is, else it ends the run. */
  pendingStop?: ServiceStop;
  /** The write of the record with its process, awaited before the final write so it cannot land after it. */
  processSaved?: Promise<unknown>;
  /** The writes of the session ids its agent printed (record, then Session), awaited before the Session is settled so none lands after it. */
  sessionNoted?: Promise<unknown>;
  /** Where it publishes once it has succeeded, when its spec asks (worktrees/publish.ts): its workspace's settings and the status page's address. */
  publishing?: { workspacePath: string; settings: PublishSettings; apiUrl: string };
  /** Its process has ended: its final record is being stored. */
  ending: boolean;
  /** Settles with its final record once durable (the lifecycle's waiters). */
  done: Promise<RunResult>;
}

/** A caller's message to a running run's agent, waiting for its next turn. */
export interface FollowUp {
  id: string;
  text: string;
}

/** The stops the service asks for by itself (the guards and a refused record are the supervisor's). */
export type ServiceStop = 'cancel' | 'shutdown' | 'result';

export function newLiveRun(a: Pick<LiveRun, 'taskId' | 'reservation' | 'resumedFrom' | 'done'>): LiveRun {
  return { ...a, ending: false, asked: [], toolCalls: 0, followUps: [], halt: new AbortController() };
}
