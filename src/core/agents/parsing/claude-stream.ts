import type { RunBudget, RunUsage } from '../../../contract/records';
import { type Emit, type Json, type ParseState, addUsage, jsonLinesParser, obj, str, toolEnded, toolStarted, usageOf } from './json-lines';

/** Qwen Code reports a failed model call as a successful result whose text is the error. */
export const API_ERROR_TEXT = /^\[API Error/;

/** The content blocks of a Claude-style message. */
export const blocksOf = (event: Json): Json[] =>
  [obj(event.message)?.content]
    .flatMap((content) => (Array.isArray(content) ? content : []))
    .map(obj)
    .filter((b): b is Json => b !== undefined);

/** The text blocks of a Claude-style assistant message. */
export const assistantText = (event: Json): string =>
  blocksOf(event)
    .map((block) => str(block.text) ?? (block.type === 'tool_use' ? 'tool_use' : ''))
    .join('');

/** The result subtypes of a run the CLI stopped at a limit it was given. */
const LIMITS: Record<string, keyof RunBudget> = { error_max_turns: 'maxTurns', error_max_budget_usd: 'maxCostUsd' };

/**
 * The usage of each model response, as it comes (a response's several events share its id and
 * usage, counted once), so a token budget is watched while the run goes on; the final result's
 * totals replace the sum.
 */
function countResponse(event: Json, state: ParseState, emit: Emit): void {
  const message = obj(event.message);
  const id = str(message?.id);
  const usage = usageOf(obj(message?.usage)?.input_tokens, obj(message?.usage)?.output_tokens);
  if (!id || !usage) return;
  state.counted ??= new Set();
  if (state.counted.has(id)) return;
  state.counted.add(id);
  state.usage = addUsage(state.usage, usage);
  emit({ type: 'usage', usage: state.usage as RunUsage });
}

/**
 * Claude-style stream (Claude Code, Qwen Code, Cursor, Amp): `session_id` on events, assistant
 * messages (an `error` on one marks a failed model call), and a final `type: "result"` whose
 * `is_error`, non-success `subtype` or API-error text means failure even after exit 0.
 */
export const claudeStyleParser = jsonLinesParser({
  onEvent(event, state, emit) {
    state.sessionId ??= str(event.session_id);
    if (event.type === 'assistant') {
      countResponse(event, state, emit);
      const text = assistantText(event);
      if (event.error === undefined && text !== '' && !API_ERROR_TEXT.test(text)) {
        state.answered = true;
        if (text !== 'tool_use') state.lastMessage = text;
        for (const block of blocksOf(event)) {
          if (block.type === 'text' && str(block.text)) emit({ type: 'message', text: block.text as string });
          else if (block.type === 'tool_use') toolStarted(state, emit, str(block.name), str(block.id));
        }
      } else if (text !== '' && text !== 'tool_use') emit({ type: 'error', message: text });
    } else if (event.type === 'user') {
      for (const block of blocksOf(event)) {
        if (block.type === 'tool_result') toolEnded(state, emit, str(block.tool_use_id), block.is_error === true);
      }
    } else if (event.type === 'tool_call') {
      // Cursor: its own tool events, named by the one key of `tool_call` (e.g. shellToolCall).
      const name = Object.keys(obj(event.tool_call) ?? {})[0]?.replace(/ToolCall$/, '');
      if (event.subtype === 'started') toolStarted(state, emit, name, str(event.call_id));
      else if (event.subtype === 'completed') toolEnded(state, emit, str(event.call_id), false, name);
    } else if (event.type === 'result') {
      const usage = obj(event.usage);
      state.usage = usageOf(usage?.input_tokens, usage?.output_tokens, event.total_cost_usd) ?? state.usage;
      if (state.usage) emit({ type: 'usage', usage: state.usage });
      const text = str(event.result);
      const errors = Array.isArray(event.errors) ? event.errors.filter((e): e is string => typeof e === 'string') : [];
      const failed =
        event.is_error === true || (event.subtype !== undefined && event.subtype !== 'success') || (text !== undefined && API_ERROR_TEXT.test(text));
      const reason = (errors.length > 0 ? errors.join('; ') : undefined) ?? text ?? str(obj(event.error)?.message) ?? str(event.subtype) ?? 'error';
      const limit = LIMITS[str(event.subtype) ?? ''];
      state.final = failed ? { error: reason, ...(limit ? { limit } : {}) } : {};
      if (failed) emit({ type: 'error', message: reason });
      if (!failed && text) state.lastMessage = text;
      // Claude Code's answer to --json-schema, and Qwen Code's.
      const structured = event.structured_output ?? event.structured_result;
      if (!failed && structured !== undefined) state.structured = { value: structured };
    }
  },
  noFinal: 'the agent printed no final result event',
});
