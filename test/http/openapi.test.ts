import { Validator } from '@seriousme/openapi-schema-validator';
import * as v from 'valibot';
import { afterEach, describe, expect, it } from 'vitest';
import {
  EventPageSchema,
  InboxItemSchema,
  RunListSchema,
  RunOutputSchema,
  RunRecordSchema,
  SessionViewSchema,
  StartAcceptedSchema,
  SyncResultSchema,
} from '../../src/contract/answers';
import { ROUTES } from '../../src/core/http/routes';
import { closeAllHosts, createTestHost } from '../helpers/harness';

afterEach(closeAllHosts);

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { operationId: string; responses: Record<string, { description: string }> }>>;
  components: { schemas: Record<string, unknown> };
};

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document with every route, and every problem code', async () => {
    const h = await createTestHost();
    const res = await h.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const doc = (await res.json()) as Doc;
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
    const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods).map((o) => o.operationId));
    expect(operations.sort()).toEqual(ROUTES.map((r) => r.name).sort());
    const text = JSON.stringify(doc);
    const { problemStatus } = await import('../../src/contract/problems');
    for (const code of [
      'invalid_body',
      'capacity_reached',
      'idempotency_key_reused',
      'invalid_webhook',
      'run_not_running',
      'inbox_item_not_found',
      'shutting_down',
    ]) {
      expect(text, code).toContain(code);
      expect(problemStatus(code as never)).toBeGreaterThanOrEqual(400);
    }
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['RunRecord', 'Problem', 'RunEvent', 'SessionView', 'InboxItem']));
  });

  it('the answers of a real run fit the schemas the document is made from', async () => {
    const h = await createTestHost();
    const json = async (method: string, path: string, body?: unknown) => (await h.request(method, path, body === undefined ? {} : { json: body })).json();
    const started = await json('POST', '/api/workspaces/ws/headless', { prompt: 'session s1; echo hi', agent: 'fake' });
    v.parse(StartAcceptedSchema, started);
    const { taskId, resumeId } = started as { taskId: string; resumeId: string };
    await h.waitEnded(taskId);
    v.parse(RunRecordSchema, await json('GET', `/api/headless/${taskId}`));
    v.parse(RunListSchema, await json('GET', '/api/headless?wsId=ws'));
    v.parse(RunOutputSchema, await json('GET', `/api/headless/${taskId}/output`));
    v.parse(EventPageSchema, await json('GET', `/api/headless/${taskId}/events?format=json`));
    v.parse(SessionViewSchema, await json('GET', `/api/sessions/${resumeId}`));
    v.parse(SyncResultSchema, await json('POST', '/api/workspaces/ws/headless', { prompt: 'echo x', agent: 'fake', wait: true }));
    v.parse(InboxItemSchema, await json('POST', '/api/workspaces/ws/inbox', { title: 't', body: 'b' }));
  });

  it('is behind the gate like every route', async () => {
    const h = await createTestHost({ adminToken: 'x'.repeat(32) });
    expect((await h.request('GET', '/openapi.json', { remote: '10.0.0.8' })).status).toBe(401);
  });
});
