import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import * as v from 'valibot';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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

describe('the document, as tools read it', () => {
  const bin = (name: string) => resolve(__dirname, '../../node_modules/.bin', name);
  let dir: string;
  let file: string;

  beforeAll(async () => {
    const h = await createTestHost();
    dir = mkdtempSync(join(tmpdir(), 'hrw-openapi-'));
    file = join(dir, 'openapi.json');
    writeFileSync(file, await (await h.request('GET', '/openapi.json')).text());
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is clean under Redocly's recommended ruleset: no error, no warning", () => {
    const lint = spawnSync(bin('redocly'), ['lint', file, '--extends', 'recommended', '--format', 'json'], {
      encoding: 'utf8',
      timeout: 120_000,
      // Loopback only: no usage data sent, no version check.
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ message: string }> };
    expect(report.problems.map((p) => p.message)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 600_000);

  it('gives openapi-typescript types a client type-checks against: numbers are numbers, bounds and names hold', () => {
    const types = spawnSync(bin('openapi-typescript'), [file, '-o', join(dir, 'api.d.ts')], { encoding: 'utf8', timeout: 120_000 });
    expect(types.status, types.stderr).toBe(0);
    writeFileSync(
      join(dir, 'use.ts'),
      [
        "import type { operations, paths } from './api';",
        "type ListQuery = NonNullable<paths['/api/headless']['get']['parameters']['query']>;",
        "export const ok: ListQuery = { wsId: 'default', limit: 2, status: 'failed' };",
        '// @ts-expect-error a limit is a number, not a string',
        "export const asText: ListQuery = { wsId: 'default', limit: '2' };",
        '// @ts-expect-error no such status',
        "export const badStatus: ListQuery = { wsId: 'default', status: 'done' };",
        "type EventsQuery = NonNullable<operations['runs.events']['parameters']['query']>;",
        'export const events: EventsQuery = { after: 3, limit: 10 };',
        "type Record = operations['runs.get']['responses'][200]['content']['application/json'];",
        'export const status = (r: Record): string => r.status;',
      ].join('\n'),
    );
    const tsc = spawnSync(bin('tsc'), ['--noEmit', '--strict', '--skipLibCheck', '--module', 'nodenext', join(dir, 'use.ts')], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  }, 600_000);

  it('names this service as its server, under its mount path; a license, and a tag on every operation that is defined', async () => {
    const doc = JSON.parse(readFileSync(file, 'utf8')) as Doc & { servers: unknown; tags: Array<{ name: string }>; info: { license: unknown } };
    expect(doc.servers).toEqual([{ url: '/', description: 'This service' }]);
    expect(doc.info.license).toEqual({ name: 'MIT', identifier: 'MIT' });
    const tags = new Set(doc.tags.map((t) => t.name));
    for (const methods of Object.values(doc.paths))
      for (const op of Object.values(methods) as unknown as Array<{ tags: string[] }>) expect(tags.has(op.tags[0]!)).toBe(true);
    const mounted = await createTestHost({ basePath: '/agents' });
    const under = (await (await mounted.request('GET', '/agents/openapi.json')).json()) as { servers: unknown };
    expect(under.servers).toEqual([{ url: '/agents', description: 'This service' }]);
  });
});
