import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/** The `tracer` option of the library (docs/deployment.md: Traces), with an in-memory exporter. */

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the tracer option', () => {
  it('a queued run’s span is still the caller’s child: the traceparent waits in the queue with it', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const gate = join(mkdtempSync(join(tmpdir(), 'hrw-trace-')), 'go');
    dirs.push(join(gate, '..'));
    const host = await createTestHost({ maxConcurrentRuns: 1, queue: { max: 5 }, tracer: provider.getTracer('test') });
    const first = await host.start(`wait-file ${gate}`);
    const traceparent = '00-6bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-01';
    const res = await host.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'fake', prompt: 'echo later' }, headers: { traceparent } });
    const queued = (await res.json()) as { taskId: string; status: string };
    expect(queued.status).toBe('queued');
    writeFileSync(gate, '');
    await host.waitEnded(first.taskId);
    expect((await host.waitEnded(queued.taskId)).status).toBe('succeeded');
    const spanOf = (taskId: string) => exporter.getFinishedSpans().find((s) => s.attributes['headless.task_id'] === taskId);
    await waitFor(() => spanOf(queued.taskId) !== undefined, { what: 'the queued run’s span' });
    const span = spanOf(queued.taskId)!;
    expect(span.spanContext().traceId).toBe('6bf92f3577b34da6a3ce929d0e0e4736');
    expect(span.parentSpanContext?.spanId).toBe('20f067aa0ba902b7');
    expect(spanOf(first.taskId)!.parentSpanContext).toBeUndefined();
  });
});
