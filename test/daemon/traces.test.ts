import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, writeConfig } from '../helpers/daemon';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver';
import { waitFor } from '../helpers/wait';

/** docs/deployment.md, Traces: the built daemon exporting to an OTLP/HTTP receiver the test runs. */

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const dirs: string[] = [];
let receiver: OtlpReceiver;
let daemon: Daemon;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  const dir = tempDir();
  dirs.push(dir);
  writeConfig(dir);
  daemon = await startDaemon(dir, ['--port', '0'], { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', TRACEPARENT: 'daemon-own' });
}, 600_000);
afterAll(async () => {
  await daemon?.stop();
  await receiver?.close();
  cleanupDaemons(dirs);
});

/** A waited run of the fake agent printing its environment. */
async function envOfRun(d: Daemon, headers: Record<string, string> = {}): Promise<{ taskId: string; env: Record<string, string> }> {
  const res = await api(d, 'POST', '/api/workspaces/ws/headless', { prompt: 'dump-env', agent: 'fake', wait: true }, headers);
  const record = (await res.json()) as { taskId: string; output: { stdout: string } };
  expect(res.status).toBe(200);
  return { taskId: record.taskId, env: JSON.parse(record.output.stdout) };
}

const spanOf = async (taskId: string) => {
  await waitFor(() => receiver.spans.some((s) => s.attributes['headless.task_id'] === taskId), { what: `the span of ${taskId}` });
  return receiver.spans.find((s) => s.attributes['headless.task_id'] === taskId)!;
};

describe('traces', () => {
  it('a run under the caller’s traceparent: its span is the caller’s child, and the agent gets the span as TRACEPARENT', async () => {
    const { taskId, env } = await envOfRun(daemon, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    const span = await spanOf(taskId);
    expect(span).toMatchObject({
      name: 'invoke_agent fake',
      traceId: CALLER_TRACE,
      parentSpanId: CALLER_SPAN,
      service: 'headless-run-webhook',
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'fake', 'headless.workspace_id': 'ws', 'headless.status': 'succeeded' },
    });
    expect(env.TRACEPARENT).toBe(`00-${CALLER_TRACE}-${span.spanId}-01`);
  });

  it('without a traceparent, or with a malformed one, a run starts its own trace; the daemon’s own TRACEPARENT never reaches it', async () => {
    for (const headers of [{}, { traceparent: 'not-a-traceparent' }] as Array<Record<string, string>>) {
      const { taskId, env } = await envOfRun(daemon, headers);
      const span = await spanOf(taskId);
      expect(span.parentSpanId).toBeUndefined();
      expect(span.traceId).not.toBe(CALLER_TRACE);
      expect(env.TRACEPARENT).toBe(`00-${span.traceId}-${span.spanId}-01`);
    }
  });

  it('a failed run’s span has an error status', async () => {
    const res = await api(daemon, 'POST', '/api/workspaces/ws/headless', { prompt: 'exit 3', agent: 'fake', wait: true });
    const { taskId } = (await res.json()) as { taskId: string };
    expect((await spanOf(taskId)).status?.code).toBe(2);
  });

  it('off by default: no OTEL_* variables, no TRACEPARENT for the agent', async () => {
    const dir = tempDir();
    dirs.push(dir);
    writeConfig(dir);
    const plain = await startDaemon(dir, ['--port', '0'], { TRACEPARENT: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    const { env } = await envOfRun(plain, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    expect(env.TRACEPARENT).toBeUndefined();
    await plain.stop();
  });
});
