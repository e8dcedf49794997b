import * as v from 'valibot';
import type { ProblemCode } from '../contract/problems';

/** `network`: the service could not be reached; `invalid_answer`: it answered what the schemas do not allow. */
export type ClientErrorCode = ProblemCode | 'network' | 'invalid_answer';

export class HeadlessError extends Error {
  constructor(
    readonly status: number,
    readonly code: ClientErrorCode,
    message: string,
    /** The problem JSON, when the service sent one. */
    readonly problem?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'HeadlessError';
  }
}

export const RETRIED_STATUS = new Set([502, 503, 504]);
export const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** An answer, checked against its schema; a problem becomes a HeadlessError with its code. */
export async function answer<S extends v.GenericSchema>(res: Response, schema: S): Promise<v.InferOutput<S>> {
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HeadlessError(res.status, 'invalid_answer', `the service answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const problem = body as Record<string, unknown>;
    const code = typeof problem.code === 'string' ? (problem.code as ProblemCode) : 'internal';
    throw new HeadlessError(res.status, code, typeof problem.detail === 'string' ? problem.detail : `the service answered ${res.status}`, problem);
  }
  const parsed = v.safeParse(schema, body);
  if (!parsed.success) throw new HeadlessError(res.status, 'invalid_answer', `unexpected answer: ${v.summarize(parsed.issues)}`);
  return parsed.output;
}

/** A query string of the set parameters. */
export const query = (params: Record<string, string | number | boolean | undefined>) => {
  const q = new URLSearchParams();
  for (const [k, value] of Object.entries(params)) if (value !== undefined) q.set(k, String(value));
  const text = q.toString();
  return text ? `?${text}` : '';
};

/** Every item of every page, following the cursors. */
export async function* pages<T>(fetchPage: (cursor?: string) => Promise<{ items: T[]; next: string | null }>): AsyncIterable<T> {
  let cursor: string | undefined;
  for (;;) {
    const page = await fetchPage(cursor);
    yield* page.items;
    if (page.next === null) return;
    cursor = page.next;
  }
}
