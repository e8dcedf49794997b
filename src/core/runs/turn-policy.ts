/**
 * @module Turn policies (docs/internals.md: The turn loop): what follows when an agent's turn
 * ends (its process exited, or, over a protocol that keeps its session open (ACP), its prompt
 * turn ended). Each policy, in order, asks for another turn on the same session with a prompt,
 * ends the run with a status of its own, or has no opinion; the first with one decides. The loop
 * is bounded: at most `MAX_TURNS` turns, every decision within what is left of the run's time,
 * and the later turns under the run's own guards (its budget counts every turn).
 */
import type { RunEventData } from '../../contract/events';
import type { RunError, RunRecord } from '../../contract/records';
import type { AgentAdapter, AgentVerdict } from '../agents/types';
import type { Log } from '../logger';
import { timedOut } from './guards';
import type { RunStop } from './outcome';
import type { GradeAnswer, GradeRequest } from './grader';
import type { TurnNotes } from './transitions';

/** A run has this many turns at most, the first included: a policy's `next` past it is no opinion. */
export const MAX_TURNS = 10;

/** What a policy is told when a turn has ended. */
export interface TurnContext {
  /** The run as it is (what it was asked: its `budget`, `metadata`, and the `outputSchema` its answer must match). */
  record: RunRecord & { outputSchema?: Record<string, unknown> };
  /** The agent that ran it. */
  adapter: AgentAdapter;
  /** The verdict so far: the turn that ended, with the usage of every turn. */
  verdict: AgentVerdict;
  /** Its answer so far: what it sent with `headless-inbox result`, else its CLI's structured output. */
  answer: { value: unknown } | undefined;
  /** The turn that ended: 1 for the first. */
  turn: number;
  /** The policies that asked for each turn after the first, in order. */
  asked: readonly string[];
  /** Another turn can be had on its session: the session is still open, or the agent can resume the one it printed. */
  canContinue: boolean;
  /** The turn ended as a success would: its process exited 0 (or its open session's turn ended), the agent reported no failure and no limit. */
  succeeded: boolean;
  /**
   * Runs a shell command as the run's agent runs: in its working directory, through its spawner
   * (its sandbox, network and user), under its marker; stopped by its own timeout, by the run's
   * stops, and when the run's time is up. Throws only when it could not be started.
   */
  run(command: TurnCommand): Promise<TurnCommandEnd>;
  /**
   * Starts a grader (runs/grader.ts: a read-only run of its own in the same workspace) and waits
   * for its end; cancelled if the run is stopped or its time is up. Throws what its start was refused with.
   */
  grade(request: GradeRequest): Promise<GradeAnswer>;
  /** Notes what it found on the run's record, durably, while it runs (its verify loop's attempts). */
  note(notes: TurnNotes): Promise<void>;
  /** Takes the follow-ups callers sent while the turn ran (docs/http-api.md: Follow-ups): the next turn's to give. */
  takeFollowUps(): Array<{ id: string; text: string }>;
  /** Adds an event of its own to the run's timeline. */
  event<T extends TurnEventType>(type: T, data: RunEventData[T]): void;
  /** Aborted when the run's time is up: the decision no longer counts. */
  signal: AbortSignal;
}

/** A command a policy runs: `what` names it in `ps` (`check`); `merged`: its stderr joins its stdout. */
export interface TurnCommand {
  what: string;
  command: string;
  timeoutMs: number;
  merged?: boolean;
}

/** How a policy's command ended. */
export interface TurnCommandEnd {
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** Stopped at its own timeout. */
  timedOut: boolean;
  /** Stopped by the run's own stop (a cancel, a shutdown, its time up). */
  stopped: boolean;
}

/** The timeline events a turn policy may add. */
export type TurnEventType = 'verify.checked' | 'verify.verdict' | 'follow-up';

/** What the launcher gives the loop: the context but its signal, its `run` taking the signal it is cut by. */
export type TurnInput = Omit<TurnContext, 'signal' | 'run' | 'grade'> & {
  run(command: TurnCommand, signal: AbortSignal): Promise<TurnCommandEnd>;
  grade(request: GradeRequest, signal: AbortSignal): Promise<GradeAnswer>;
};

/** How a policy ends a run: `succeeded`, or `failed` with the error that says why. */
export type TurnEnd = { status: 'succeeded' } | { status: 'failed'; error: RunError };

/** Another turn on the same session (`prompt`, with `reason` shown on its timeline), the run's end, or no opinion (`undefined`). */
export type TurnDecision = { next: { prompt: string; reason: string } } | { end: TurnEnd } | undefined;

export interface TurnPolicy {
  /** Names it on the timeline and in `asked`. */
  readonly name: string;
  decide(context: TurnContext): TurnDecision | Promise<TurnDecision>;
}

/** What the loop does next: another turn, asked for by `policy`; an end of its own (a policy's, or the watchdog's); or the run ends as judged. */
export type TurnOutcome = { next: { prompt: string; reason: string; policy: string } } | { end: RunStop } | undefined;

/** The time left of a run that started at `startedAt`, in ms (at most 0). */
export function timeLeft(record: { timeoutMs: number; startedAt?: string; createdAt: string }): number {
  return record.timeoutMs - (Date.now() - Date.parse(record.startedAt ?? record.createdAt));
}

/**
 * Asks the policies in order; the first with an opinion decides. A policy that throws has none
 * (it is logged); one still deciding when the run's time is up ends it `timed_out`, or when the
 * run is stopped (`halt`: cancel, shutdown, its answer, a guard), leaves it to that stop.
 */
export async function decideTurn(policies: readonly TurnPolicy[], input: TurnInput, o: { log: Log; halt: AbortSignal }): Promise<TurnOutcome> {
  const left = timeLeft(input.record);
  if (left <= 0 || o.halt.aborted) return undefined;
  const controller = new AbortController();
  const { signal } = controller;
  const context: TurnContext = { ...input, signal, run: (command) => input.run(command, signal), grade: (request) => input.grade(request, signal) };
  let timer: NodeJS.Timeout | undefined;
  let halted: () => void = () => undefined;
  const cut = new Promise<'late' | 'halted'>((resolve) => {
    timer = setTimeout(() => resolve('late'), left);
    halted = () => resolve('halted');
    o.halt.addEventListener('abort', halted, { once: true });
  });
  try {
    for (const policy of policies) {
      const decision = await Promise.race([ask(policy, context, o.log), cut]);
      if (decision === 'late' || decision === 'halted') {
        controller.abort();
        return decision === 'late' ? { end: timedOut(context.record.timeoutMs) } : undefined;
      }
      if (decision === undefined) continue;
      if ('end' in decision) return { end: { reason: policy.name, ...decision.end } };
      if (context.canContinue && context.turn < MAX_TURNS) return { next: { ...decision.next, policy: policy.name } };
    }
    return undefined;
  } finally {
    clearTimeout(timer);
    o.halt.removeEventListener('abort', halted);
  }
}

/** One policy's decision; one that throws has no opinion. */
async function ask(policy: TurnPolicy, context: TurnContext, log: Log): Promise<TurnDecision> {
  try {
    return await policy.decide(context);
  } catch (error) {
    log(`the turn policy ${policy.name} failed on ${context.record.taskId}`, error);
    return undefined;
  }
}
