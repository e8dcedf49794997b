import { afterEach, expect, it } from 'vitest';
import { closeAllHosts, createTestHost } from '../helpers/harness';

afterEach(closeAllHosts);

// The in-process event stream of POST /mcp sends nothing but a heartbeat between events: with the
// heartbeat ten minutes away, a wait_run that missed its timeout would hang past the test's limit.
it('wait_run over POST /mcp answers the record as it is once timeoutSeconds pass, without waiting for the stream', async () => {
  const host = await createTestHost({ heartbeatMs: 600_000 });
  const { taskId } = await host.start('sleep 60000');
  const res = await host.request('POST', '/mcp', {
    headers: { accept: 'application/json, text/event-stream' },
    json: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'wait_run', arguments: { taskId, timeoutSeconds: 1 } } },
  });
  const answer = (await res.json()) as { result: { structuredContent: Record<string, unknown> } };
  expect(answer.result.structuredContent).toMatchObject({ taskId, status: 'running' });
  await host.request('POST', `/api/headless/${taskId}/cancel`);
}, 600_000);
