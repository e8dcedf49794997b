import { afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost, fakeAgent } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/** docs/structured-output.md: the answer checked with Ajv; a repair turn; the failures (test/daemon/structured-output.test.ts: headless-inbox result). */

afterEach(closeAllHosts);
const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };

async function host() {
  return createTestHost({ workspaces: [{ id: 'ws', path: process.cwd(), agents: ['fake'] }], agents: { fake: fakeAgent } });
}

type Host = Awaited<ReturnType<typeof host>>;
const start = async (h: Host, body: Record<string, unknown>) =>
  (await h.request('POST', '/api/workspaces/ws/headless', { json: body })).json() as Promise<Record<string, any>>;
const ended = async (h: Host, taskId: string) => {
  let record: Record<string, any> = {};
  await waitFor(async () => {
    record = (await (await h.request('GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
    return !['running', 'queued'].includes(record.status);
  });
  return record;
};

describe('structured output', () => {
  it('no answer, and no agent session to ask again on: failed, output_missing', async () => {
    const h = await host();
    const { taskId } = await start(h, { prompt: 'echo done', outputSchema: schema });
    expect(await ended(h, taskId)).toMatchObject({
      status: 'failed',
      error: { code: 'output_missing', message: "The run's answer could not be used: the agent gave no structured answer." },
    });
  });

  it('no answer from an agent that can resume: one repair turn on its session, which says what was wrong, then failed', async () => {
    const h = await host();
    const { taskId } = await start(h, { prompt: 'session s1; echo done', outputSchema: schema });
    expect(await ended(h, taskId)).toMatchObject({ status: 'failed', error: { code: 'output_missing' } });
    const page = (await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string; data: any }> };
    expect(page.events.filter((e) => e.type === 'message' && String(e.data.text).startsWith('(the service asks again'))).toHaveLength(1);
    expect(h.spawner.count).toBe(2);
  });

  it('refuses a schema Ajv (strict) refuses, a result for a run without a schema, and a body without a value', async () => {
    const h = await host();
    const bad = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'echo hi', outputSchema: { type: 'object', propertees: {} } } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      code: 'invalid_body',
      detail: expect.stringContaining('Field "outputSchema" is invalid: strict mode: unknown keyword: "propertees"'),
    });
    const plain = await start(h, { prompt: 'sleep 600000' });
    const noSchema = await h.request('POST', `/api/headless/${plain.taskId}/result`, { json: { value: 1 } });
    expect(noSchema.status).toBe(400);
    expect(await noSchema.json()).toMatchObject({ detail: expect.stringContaining('without an outputSchema') });
    const noValue = await h.request('POST', `/api/headless/${plain.taskId}/result`, { json: { answer: 1 } });
    expect(await noValue.json()).toMatchObject({ code: 'invalid_body', detail: 'The body must be {"value": <the answer>}.' });
    await h.request('POST', `/api/headless/${plain.taskId}/cancel`);
  });
});
