/**
 * @module What an agent's protocol can do to its run (docs/internals.md): write to the agent once
 * its process exists, report events (usage bounded and priced over the turns before, tool calls
 * counted for the budget, each on the timeline and to the guards), ask a permission question, and
 * ask for the next turn on a session it keeps open.
 */
import type { RunUsage } from '../../contract/records';
import { addUsage } from '../agents/parsing/json-lines';
import { type TokenPrice, priced } from '../agents/prices';
import { higherUsage } from '../agents/reported-usage';
import type { AgentEvent, AgentIO } from '../agents/types';
import { type RunEvents, fromAgentEvent } from '../events/run-events';
import type { LiveRun } from './live-run';
import type { RunQuestions } from './questions';
import { laterTurn } from './repair-turn';
import { redactValue } from './run-secrets';
import type { SupervisedProcess } from './supervisor';

export interface AgentIOInput {
  live: LiveRun;
  /** The guards' listeners, told each event. */
  watchers: Array<(event: AgentEvent) => void>;
  /** The agent's token price, for an agent that reports tokens only. */
  price: TokenPrice | undefined;
  questions: RunQuestions;
  events: RunEvents;
  /** The next turn's prompt on the open session, or undefined to end it. */
  next: () => Promise<string | undefined>;
}

/** What the agent's protocol can do to the run: write to the agent, add to its timeline (which its guards watch). */
export function agentIO(o: AgentIOInput): AgentIO & { attach(proc: SupervisedProcess): void } {
  const { live, watchers, price, questions, next } = o;
  // What the protocol writes before its process exists (ACP's `initialize`) waits for it.
  let target: SupervisedProcess | undefined;
  const queued: string[] = [];
  let ended = false;
  const flush = () => {
    if (!target) return;
    const write = target.write;
    if (!write && queued.length > 0) throw new Error('this spawner cannot write to the agent: a protocol that talks back needs `SpawnedProcess.write`');
    for (const data of queued.splice(0)) write?.(data);
    if (ended) target.end?.();
  };
  return {
    attach(proc) {
      target = proc;
      flush();
    },
    write(data) {
      queued.push(data);
      flush();
    },
    end() {
      ended = true;
      flush();
    },
    emit: (emitted) => {
      // Decoded by now: a value the raw line hid in escapes is taken out here.
      const reported = redactValue(emitted, live.redact);
      // Its cost, where it reports tokens only, estimated here, over its turns before, and never lower than it was: the budget guard and the timeline see the same.
      if (reported.type === 'usage') live.usage = higherUsage(live.usage, afterTurns(live.usageBefore, priced(reported.usage, price)));
      if (reported.type === 'tool' && reported.status === 'started') live.toolCalls += 1;
      const event = reported.type === 'usage' && live.usage ? { ...reported, usage: live.usage } : reported;
      const { type, data } = fromAgentEvent(event);
      o.events.append(live.taskId, type, data);
      for (const watch of watchers) watch(event);
    },
    ask: (question) => questions.ask(redactValue(question, live.redact)),
    next: (told) => {
      const verdict = redactValue(told, live.redact);
      live.verdict = live.earlier ? laterTurn(live.earlier, verdict) : verdict;
      return next();
    },
  };
}

/** A turn's usage over the usage of the turns before it. */
function afterTurns(before: RunUsage | undefined, turn: RunUsage): RunUsage {
  const sum = addUsage(before, turn) ?? turn;
  return before?.costEstimated || turn.costEstimated ? { ...sum, costEstimated: true } : sum;
}
