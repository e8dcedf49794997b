import { ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { RunEvent } from '../../contract/events';
import type { RunRecord } from '../../contract/records';
import type { ServiceSubscriber } from './observer';

/** A W3C `traceparent`: version 00, trace id, parent span id, flags. */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A caller's `traceparent` as the parent context of a run's span; undefined if absent or malformed (then the run starts a trace). */
function parentOf(traceparent: string | undefined) {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent.trim().toLowerCase());
  const [, traceId, spanId, flags] = m ?? [];
  if (traceId === undefined || spanId === undefined || flags === undefined || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: Number.parseInt(flags, 16) & 1, isRemote: true });
}

/** Whether a header value is a well-formed `traceparent` (what a start keeps of it). */
export const isTraceparent = (value: string): boolean => TRACEPARENT.test(value.trim().toLowerCase());

export interface RunTracingOptions {
  tracer: Tracer;
  /** A run's events, read once it has ended: its tool calls become child spans. */
  events(record: RunRecord): Promise<RunEvent[]>;
  log(message: string, error: unknown): void;
}

/**
 * A span per run (`invoke_agent <agent>`, per the GenAI semantic conventions) under the caller's
 * `traceparent`, begun when its agent starts, so the agent gets it as `TRACEPARENT`; at its end,
 * a child span per tool call of its timeline (`execute_tool <name>`), then the run's outcome.
 */
export class RunTracing {
  private readonly spans = new Map<string, Span>();

  constructor(private readonly o: RunTracingOptions) {}

  /** Begins the run's span; returns the `traceparent` to hand its agent. */
  begin(run: RunRecord, traceparent: string | undefined): string {
    const span = this.o.tracer.startSpan(
      `invoke_agent ${run.agent}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'gen_ai.agent.name': run.agent,
          'gen_ai.conversation.id': run.resumeId,
          'headless.task_id': run.taskId,
          'headless.workspace_id': run.workspaceId,
          ...(run.schedule ? { 'headless.schedule': run.schedule } : {}),
        },
      },
      parentOf(traceparent),
    );
    this.spans.set(run.taskId, span);
    const { traceId, spanId, traceFlags } = span.spanContext();
    return `00-${traceId}-${spanId}-0${traceFlags & 1}`;
  }

  /** The observer that ends each span once its run's final record is durable. */
  observer(): ServiceSubscriber {
    return {
      runEnded: (run) => {
        const span = this.spans.get(run.taskId);
        if (!span) return;
        this.spans.delete(run.taskId);
        this.end(span, run).catch((error: unknown) => this.o.log(`could not end the trace span of ${run.taskId}`, error));
      },
    };
  }

  private async end(span: Span, run: RunRecord): Promise<void> {
    const parent = trace.setSpan(ROOT_CONTEXT, span);
    const started = new Map<string, RunEvent>();
    for (const event of await this.o.events(run).catch(() => [])) {
      if (event.type === 'verify.checked') this.checkSpan(parent, event);
      if (event.type !== 'tool') continue;
      const key = event.data.id ?? event.data.name;
      if (event.data.status === 'started') {
        started.set(key, event);
        continue;
      }
      const begun = started.get(key);
      started.delete(key);
      const tool = this.o.tracer.startSpan(
        `execute_tool ${event.data.name}`,
        { startTime: new Date(begun?.time ?? event.time), attributes: toolAttributes(event) },
        parent,
      );
      if (event.data.status === 'failed') tool.setStatus({ code: SpanStatusCode.ERROR });
      tool.end(new Date(event.time));
    }
    span.setAttributes({
      'headless.status': run.status,
      ...(run.exitCode === null ? {} : { 'headless.exit_code': run.exitCode }),
      ...(run.usage ? { 'gen_ai.usage.input_tokens': run.usage.inputTokens, 'gen_ai.usage.output_tokens': run.usage.outputTokens } : {}),
    });
    if (run.status !== 'succeeded') span.setStatus({ code: SpanStatusCode.ERROR, message: run.error?.code ?? run.status });
    span.end(run.endedAt ? new Date(run.endedAt) : undefined);
  }

  /** A check of its verify loop (docs/verify.md): a child span over the time it ran. */
  private checkSpan(parent: ReturnType<typeof trace.setSpan>, event: Extract<RunEvent, { type: 'verify.checked' }>): void {
    const { name, attempt, exitCode, passed, durationMs } = event.data;
    const end = new Date(event.time);
    const attributes = { 'headless.check.name': name, 'headless.check.attempt': attempt, ...(exitCode === null ? {} : { 'headless.exit_code': exitCode }) };
    const span = this.o.tracer.startSpan(`verify_check ${name}`, { startTime: new Date(end.getTime() - durationMs), attributes }, parent);
    if (!passed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(end);
  }
}

const toolAttributes = (event: Extract<RunEvent, { type: 'tool' }>) => ({
  'gen_ai.operation.name': 'execute_tool',
  'gen_ai.tool.name': event.data.name,
  ...(event.data.id ? { 'gen_ai.tool.call.id': event.data.id } : {}),
});
