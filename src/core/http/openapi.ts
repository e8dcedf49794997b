import { type ConversionConfig, toJsonSchema, toJsonSchemaDefs } from '@valibot/to-json-schema';
import type * as v from 'valibot';
import { verifierOf } from './auth';
import type { RouteAuth, RouteDoc } from './router';
import { ANSWERS } from '../../contract/answers';
import { type ProblemCode, problemStatus } from '../../contract/problems';

/** The OpenAPI 3.1 document, generated from the route table and the valibot schemas. */

type Schema = v.GenericSchema;

/** What a route says of itself for the document. */

/** Named schemas, shown once under `components.schemas` and referred to. */
const COMPONENTS: Record<string, Schema> = ANSWERS;

/** Every route can be refused by the gate, and any can meet a store that fails. */
const COMMON_PROBLEMS: ProblemCode[] = ['unauthorized', 'forbidden', 'not_found', 'method_not_allowed', 'internal', 'storage_unavailable'];

const config = (typeMode: 'input' | 'output'): ConversionConfig => ({
  target: 'draft-2020-12',
  typeMode,
  // Transforms (query strings to numbers) have no JSON Schema: the string form is what is sent.
  errorMode: 'ignore',
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
});

const NAMES = new Map(Object.entries(COMPONENTS).map(([name, schema]) => [schema, name]));

function jsonSchema(schema: Schema, typeMode: 'input' | 'output'): Record<string, unknown> {
  const name = NAMES.get(schema);
  if (name && typeMode === 'output') return { $ref: `#/components/schemas/${name}` };
  const {
    $schema: _,
    $defs: __,
    ...rest
  } = toJsonSchema(schema, { ...config(typeMode), definitions: typeMode === 'output' ? COMPONENTS : undefined }) as Record<string, unknown>;
  return rest;
}

function content(r: RouteDoc['responses'][number]): Record<string, unknown> {
  const types: Record<string, unknown> = {};
  if (r.schema) types['application/json'] = { schema: jsonSchema(r.schema, 'output') };
  if (r.stream) {
    types['text/event-stream'] = { schema: jsonSchema(r.stream, 'output') };
    types['application/x-ndjson'] = { schema: jsonSchema(r.stream, 'output') };
  }
  return types;
}

function parameters(path: string, doc: RouteDoc): unknown[] {
  const params: unknown[] = [...path.matchAll(/:(\w+)/g)].map(([, name]) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
  if (doc.query) {
    const query = jsonSchema(doc.query, 'input') as { properties?: Record<string, unknown>; required?: string[] };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      // A number sent as digits is shown as the integer it is (requests.ts: queryInt).
      const shown = (schema as { openapi?: unknown }).openapi ?? schema;
      params.push({ name, in: 'query', required: query.required?.includes(name) ?? false, schema: shown });
    }
  }
  for (const header of doc.headers ?? [])
    params.push({ name: header.name, in: 'header', required: false, description: header.description, schema: { type: 'string' } });
  return params;
}

function problemResponses(codes: ProblemCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of [...codes, ...COMMON_PROBLEMS]) byStatus.set(problemStatus(code), [...(byStatus.get(problemStatus(code)) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      String(status),
      {
        description: `Problem: ${[...new Set(list)].join(', ')}`,
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
    ]),
  );
}

/** Operations are grouped by what they act on: the first part of the route's name. */
const TAGS: Record<string, string> = {
  runs: 'Start a run, read it, its output and its events, list and cancel runs.',
  sessions: 'A Session: the runs that continue one agent conversation.',
  inbox: "A workspace's Inbox: the reports agents push.",
  agents: 'The agent checks, as `doctor` makes them.',
  workspaces: 'The listed workspaces.',
  health: 'Liveness and readiness, open to probes.',
  service: 'The service itself: its version, its metrics, this document, the status page, MCP.',
};

const tagOf = (routeName: string) => {
  const group = routeName.split('.')[0] ?? '';
  return group in TAGS ? group : 'service';
};

/** An operation's security, from who its route lets in: a local caller needs nothing, others the admin token; some take a run token. */
function security(auth: RouteAuth): Array<Record<string, string[]>> {
  return [...verifierOf(auth).security];
}

export function openApiDocument(
  routes: ReadonlyArray<{ name: string; method: string; path: string; auth: RouteAuth; doc: RouteDoc }>,
  version: string,
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const { doc } = route;
    const openPath = route.path.replace(/:(\w+)/g, '{$1}');
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(doc.responses)) {
      responses[status] = { description: r.description, ...(r.schema || r.stream ? { content: content(r) } : {}) };
    }
    paths[openPath] ??= {};
    paths[openPath][route.method.toLowerCase()] = {
      operationId: route.name,
      summary: doc.summary,
      tags: [tagOf(route.name)],
      security: security(route.auth),
      parameters: parameters(route.path, doc),
      ...(doc.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(doc.body, 'input') } } } } : {}),
      responses: { ...responses, ...problemResponses(doc.problems) },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'headless-run-webhook',
      version,
      description: 'Make a workspace run a coding agent headless, and read back what happened.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      schemas: toJsonSchemaDefs(COMPONENTS, config('output')),
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: 'HEADLESS_ADMIN_TOKEN; local callers need none.' },
        runToken: { type: 'http', scheme: 'bearer', description: "A run's HEADLESS_RUN_TOKEN, while the run runs: its own workspace's Inbox push, and MCP." },
        senderSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'X-Hub-Signature-256',
          description:
            "A trigger's own verification, the sender's way: GitHub's X-Hub-Signature-256, GitLab's X-Gitlab-Token, Standard Webhooks, Sentry-Hook-Signature, X-PagerDuty-Signature, Grafana's HMAC, a generic HMAC, Bearer or Basic (docs/triggers.md).",
        },
      },
    },
  };
}

/** The document as served under `basePath`: relative, so it names the service wherever it is mounted and however it is reached. */
export const servedAt = (document: Record<string, unknown>, basePath: string) => ({
  ...document,
  servers: [{ url: basePath || '/', description: 'This service' }],
});
