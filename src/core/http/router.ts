// whatwg-node's Response: on node:http its string bodies skip the web-stream machinery.
import { Response } from '@whatwg-node/fetch';
import { ID_PATTERN } from '../../contract/ids';
import { HttpProblem } from '../../contract/problems';
import type { Credential, RouteAuth } from './auth';
import type { RouteServices } from './route-services';

export type { RouteAuth } from './auth';
export type { RouteServices } from './route-services';
import type * as v from 'valibot';
import type { ProblemCode } from '../../contract/problems';

type Schema = v.GenericSchema;

/** What a route says of itself in the OpenAPI document. */
export interface RouteDoc {
  summary: string;
  query?: Schema;
  body?: Schema;
  /** Request headers it reads. */
  headers?: Array<{ name: string; description: string }>;
  /** Its success answers: status → description, the schema of a JSON body, and of each item of a stream. */
  responses: Record<number, { description: string; schema?: Schema; stream?: Schema }>;
  /** The problems it can answer with, besides those of every route (the gate, 404, 405, 503). */
  problems: ProblemCode[];
}

/** One request, as a handler sees it: `params` typed by the route's path, `verified` by its verifier. */
export interface RouteContext<P, V = void> {
  request: Request;
  url: URL;
  params: P;
  /** The path the handler is mounted under, without a trailing slash (`""` at the root). */
  basePath: string;
  /** The base URL runs are given as `HEADLESS_API_URL`. */
  apiUrl: string;
  credential: Credential;
  /** What the route's verifier let in (a sender's trigger and body); nothing for the built-in ones. */
  verified: V;
  services: RouteServices;
  /** Answers another request in-process, as if it came from the same peer. */
  dispatch(url: string, init: RequestInit): Promise<Response>;
}

/** `/a/:x/b/:y` → `"x" | "y"`. */
type ParamNames<Path extends string> = Path extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : Path extends `${string}:${infer Name}`
    ? Name
    : never;

export interface Route {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  auth: RouteAuth;
  segments: string[];
  /** What the OpenAPI document says of it. */
  doc: RouteDoc;
  handle(context: RouteContext<Record<string, string>, unknown>): Promise<Response>;
}

export function route<Path extends string, V = void>(
  declared: { name: string; method: Route['method']; path: Path; auth: RouteAuth<V>; doc: RouteDoc },
  handle: (context: RouteContext<Record<ParamNames<Path>, string>, V>) => Promise<Response>,
): Route {
  return { ...declared, segments: declared.path.slice(1).split('/'), handle: handle as Route['handle'] };
}

/** An answer: its status, JSON body and headers (what a start's Idempotency-Key keeps). */
export interface HttpAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** An answer as a JSON response; a content type of its own (problem JSON) wins. */
export const answer = (a: HttpAnswer, extra: Record<string, string> = {}) =>
  new Response(JSON.stringify(a.body), { status: a.status, headers: { 'content-type': 'application/json', ...a.headers, ...extra } });

export const json = (body: unknown, status = 200) => answer({ status, body, headers: {} });

/** What a path id that cannot be one (not of the id pattern: a NUL, a slash, 200 characters) is answered with. */
const PARAM_PROBLEMS: Record<string, ProblemCode> = {
  taskId: 'run_not_found',
  resumeId: 'session_not_found',
  workspaceId: 'workspace_not_found',
  itemId: 'inbox_item_not_found',
};

/** Refuses a path id that is not of the id pattern, before any store sees it. */
export function checkParams(params: Record<string, string>): void {
  for (const [name, value] of Object.entries(params)) {
    if (!ID_PATTERN.test(value))
      throw new HttpProblem(PARAM_PROBLEMS[name] ?? 'not_found', `No such ${name.replace(/Id$/, '')}: the id is not of the form ${ID_PATTERN.source}.`);
  }
}

export interface RouteMatch {
  route: Route;
  params: Record<string, string>;
}

function segmentsOf(pathname: string, basePath: string): string[] | undefined {
  if (basePath && pathname !== basePath && !pathname.startsWith(`${basePath}/`)) return undefined;
  const rest = pathname.slice(basePath.length);
  if (!rest.startsWith('/')) return undefined;
  try {
    // Most paths have nothing escaped: decoding is skipped for those (it is a cost on every request).
    return rest
      .slice(1)
      .split('/')
      .map((segment) => (segment.includes('%') ? decodeURIComponent(segment) : segment));
  } catch {
    return undefined;
  }
}

/**
 * The route for a request, matched on decoded path segments below `basePath`; or the problem
 * to answer (404 `not_found`, 405 `method_not_allowed`), which is answered after the gate.
 */
export function matchRoute(routes: readonly Route[], method: string, pathname: string, basePath: string): RouteMatch | HttpProblem {
  const segments = segmentsOf(pathname, basePath);
  const allowed: string[] = [];
  for (const candidate of segments ? routes : []) {
    if (candidate.segments.length !== segments?.length) continue;
    const params: Record<string, string> = {};
    const fits = candidate.segments.every((part, i) => {
      const segment = segments[i] ?? '';
      if (!part.startsWith(':')) return part === segment;
      params[part.slice(1)] = segment;
      return segment !== '';
    });
    if (!fits) continue;
    if (candidate.method === method) return { route: candidate, params };
    allowed.push(...(candidate.method === 'GET' ? ['GET', 'HEAD'] : [candidate.method]));
  }
  if (allowed.length > 0) {
    return new HttpProblem('method_not_allowed', `Use ${allowed.join(' or ')} on this path.`, { headers: { allow: allowed.join(', ') } });
  }
  return new HttpProblem('not_found', 'No such route.');
}
