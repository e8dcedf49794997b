import type { RunBudget, RunUsage } from '../../../contract/records';
import { costUsd as reportedCost, tokenCount } from '../reported-usage';
import type { AgentEvent, AgentOutputParser, AgentVerdict } from '../types';

/** The parsing kit every built-in adapter shares: JSON lines, tool calls, usage, and one parser over them. */

export type Json = Record<string, unknown>;

export function parseJson(line: string): Json | undefined {
  const text = line.trim();
  if (!text.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

export const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
export const obj = (value: unknown): Json | undefined => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined);

/** What a parser has learnt from the events so far. */
export interface ParseState {
  sessionId?: string;
  /** The final verdict: `{}` for success, `{ error }` for a failure. Absent until a final event. */
  final?: { error?: string; limit?: keyof RunBudget };
  /** The latest error the agent reported on the way (retries included); used if it then fails without saying why. */
  lastError?: string;
  /** Set once the model answered (text or a tool call), never for an error shown as a message. */
  answered?: boolean;
  usage?: RunUsage;
  lastMessage?: string;
  /** Its structured answer, where the CLI reports one. */
  structured?: { value: unknown };
  /** Gemini: the last event was an assistant delta, so the next one continues its message. */
  continues?: boolean;
  /** Tool names by call id, for results that name only the id. */
  tools?: Map<string, string>;
  /** Claude-style: the model responses whose usage is already counted (one response comes as several events). */
  counted?: Set<string>;
}

export type Emit = (event: AgentEvent) => void;

/** Remembers a started tool call, for its result, which may name only its id. */
export function toolStarted(state: ParseState, emit: Emit, name: string | undefined, id: string | undefined): void {
  const tool = name ?? 'tool';
  if (id !== undefined) {
    state.tools ??= new Map();
    state.tools.set(id, tool);
  }
  emit({ type: 'tool', name: tool, status: 'started', ...(id === undefined ? {} : { id }) });
}

export function toolEnded(state: ParseState, emit: Emit, id: string | undefined, failed: boolean, name?: string): void {
  const tool = name ?? (id === undefined ? undefined : state.tools?.get(id)) ?? 'tool';
  if (id !== undefined) state.tools?.delete(id);
  emit({ type: 'tool', name: tool, status: failed ? 'failed' : 'succeeded', ...(id === undefined ? {} : { id }) });
}

export const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** Usage from token counts as the agent names them, each bounded at 0 (a negative step would undo earlier ones); undefined when it gave none. */
export function usageOf(input: unknown, output: unknown, cost?: unknown): RunUsage | undefined {
  if (num(input) === undefined && num(output) === undefined) return undefined;
  // Infinity (a JSON 1e999) is a figure too: the ceiling, never "no cost".
  const costUsd = typeof cost === 'number' && !Number.isNaN(cost) ? reportedCost(cost) : undefined;
  return { inputTokens: tokenCount(input), outputTokens: tokenCount(output), ...(costUsd === undefined ? {} : { costUsd }) };
}

/** Adds a step's usage to the run's (opencode reports one per step). */
export function addUsage(total: RunUsage | undefined, step: RunUsage | undefined): RunUsage | undefined {
  if (!step) return total;
  if (!total) return step;
  const costUsd = total.costUsd === undefined && step.costUsd === undefined ? undefined : (total.costUsd ?? 0) + (step.costUsd ?? 0);
  return {
    inputTokens: total.inputTokens + step.inputTokens,
    outputTokens: total.outputTokens + step.outputTokens,
    ...(costUsd === undefined ? {} : { costUsd }),
  };
}

export interface ParserSpec {
  /** Learns from one event, and emits what it meant for the run's timeline. */
  onEvent(event: Json, state: ParseState, emit: Emit): void;
  /** The failure when the process exited 0 but printed no final event; absent: exit 0 is enough. */
  noFinal?: string;
  /** Learns from a line that is not a JSON event (a CLI that prints some errors as text). */
  onText?(line: string, state: ParseState): void;
}

/** A parser over JSON lines; the verdict combines the final event with the exit code. */
export function jsonLinesParser(spec: ParserSpec): () => AgentOutputParser {
  return () => {
    const state: ParseState = {};
    return {
      line(line) {
        const event = parseJson(line);
        if (!event) {
          spec.onText?.(line, state);
          return [];
        }
        const events: AgentEvent[] = [];
        spec.onEvent(event, state, (e) => events.push(e));
        return events;
      },
      sessionId: () => state.sessionId,
      finish(exitCode) {
        const verdict: AgentVerdict = { agentSessionId: state.sessionId, answered: state.answered === true };
        if (state.usage) verdict.usage = state.usage;
        if (state.lastMessage) verdict.lastMessage = state.lastMessage;
        if (state.structured) verdict.structured = state.structured;
        const error = state.final?.error ?? (exitCode !== 0 ? state.lastError : undefined);
        if (error) verdict.error = error;
        if (state.final?.limit) verdict.limit = state.final.limit;
        else if (!state.final && exitCode === 0 && spec.noFinal) verdict.error = spec.noFinal;
        return verdict;
      },
    };
  };
}
