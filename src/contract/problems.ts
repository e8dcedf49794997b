/** Every error the service can answer with: its code, HTTP status and problem JSON (RFC 9457). */

const STATUS = {
  invalid_body: 400,
  prompt_required: 400,
  prompt_too_long: 400,
  invalid_timeout: 400,
  invalid_resume_id: 400,
  agent_unknown: 400,
  agent_not_headless: 400,
  agent_disabled: 400,
  no_headless_agent: 400,
  resume_requires_async: 400,
  verify_unsupported: 400,
  invalid_idempotency_key: 400,
  invalid_webhook: 400,
  unauthorized: 401,
  forbidden: 403,
  webhook_not_allowed: 403,
  approval_from_run: 403,
  policy_loosened: 403,
  workspace_not_found: 404,
  run_not_found: 404,
  session_not_found: 404,
  schedule_not_found: 404,
  trigger_not_found: 404,
  inbox_item_not_found: 404,
  approval_not_found: 404,
  not_found: 404,
  method_not_allowed: 405,
  session_other_workspace: 409,
  session_busy: 409,
  session_retired: 409,
  session_not_resumable: 409,
  run_not_running: 409,
  run_cannot_continue: 409,
  approval_answered: 409,
  idempotency_key_in_use: 409,
  body_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  template_error: 422,
  worktree_unavailable: 422,
  output_invalid: 422,
  changes_not_found: 404,
  capacity_reached: 429,
  queue_full: 429,
  too_many_attempts: 429,
  rate_limited: 429,
  daily_limit_reached: 429,
  spawn_failed: 500,
  internal: 500,
  not_installed: 501,
  storage_unavailable: 503,
  shutting_down: 503,
  run_owner_unreachable: 503,
  not_ready: 503,
  trigger_busy: 503,
  delivery_in_progress: 503,
} as const;

export type ProblemCode = keyof typeof STATUS;

export const problemStatus = (code: ProblemCode): number => STATUS[code];

const TITLES: Partial<Record<ProblemCode, string>> = {
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  body_too_large: 'Body too large',
  unsupported_media_type: 'Unsupported media type',
  capacity_reached: 'Capacity reached',
  queue_full: 'Queue full',
  too_many_attempts: 'Too many attempts',
  internal: 'Internal error',
  not_ready: 'Not ready',
};

export interface RefusalOptions {
  /** Seconds after which the same request may succeed (answered as `Retry-After`). */
  retryAfterSeconds?: number;
  /** Extra members of the problem body (e.g. the `taskId` of a failed spawn). */
  extra?: Record<string, unknown>;
}

/**
 * The service's own code deciding that a request cannot be done: a problem code and what to tell
 * the caller, nothing of HTTP. Only the HTTP edge turns it into an answer (status, headers,
 * problem JSON); the fleet, schedules and triggers read its code.
 */
export class Refusal extends Error {
  readonly code: ProblemCode;
  readonly retryAfterSeconds: number | undefined;
  readonly extra: Record<string, unknown>;

  constructor(code: ProblemCode, detail: string, options: RefusalOptions = {}) {
    // An answer, not a fault: no stack to capture (capturing one made every 4xx cost a third more than a 200).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(detail);
    Error.stackTraceLimit = limit;
    this.name = 'Refusal';
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.extra = options.extra ?? {};
  }
}

/** A refusal made at the HTTP edge itself (the gate, routing, a request's body), with headers of its own. */
export class HttpProblem extends Refusal {
  readonly headers: Record<string, string>;

  get status(): number {
    return STATUS[this.code];
  }

  constructor(code: ProblemCode, detail: string, options: RefusalOptions & { headers?: Record<string, string> } = {}) {
    super(code, detail, options);
    this.name = 'HttpProblem';
    this.headers = options.headers ?? {};
  }
}

/** Raised by a store that refused a write or read; answered as 503 storage_unavailable. */
export class StorageError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StorageError';
  }

  /** The store's `operation` failed with `error`, whose message it carries. */
  static of(operation: string, error: unknown): StorageError {
    const reason = error instanceof Error ? error.message : String(error);
    return new StorageError(`store ${operation} failed: ${reason}`, { cause: error });
  }
}

function title(code: ProblemCode): string {
  return TITLES[code] ?? code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
}

/** The problem JSON of an answer (RFC 9457), with the stable `code` and any extra members. */
function problemBody(problem: Refusal): Record<string, unknown> {
  return {
    type: `https://headless-run-webhook.dev/problems/${problem.code}`,
    title: title(problem.code),
    status: STATUS[problem.code],
    detail: problem.message,
    code: problem.code,
    ...problem.extra,
  };
}

/** An answer's headers: the edge's own, `Retry-After` when the refusal says when, and the problem type. */
const problemHeaders = (problem: Refusal): Record<string, string> => ({
  ...(problem instanceof HttpProblem ? problem.headers : {}),
  ...(problem.retryAfterSeconds === undefined ? {} : { 'retry-after': String(problem.retryAfterSeconds) }),
  'content-type': 'application/problem+json',
});

/** A refusal's answer, as the HTTP edge sends it and an idempotent request replays it: its status, problem JSON and headers. */
export function problemAnswer(problem: Refusal): { status: number; body: Record<string, unknown>; headers: Record<string, string> } {
  return { status: STATUS[problem.code], body: problemBody(problem), headers: problemHeaders(problem) };
}
