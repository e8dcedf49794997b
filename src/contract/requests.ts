import * as v from 'valibot';
import { ID_PATTERN, sortableIdPattern } from './ids';
import { HttpProblem, type ProblemCode } from './problems';
import { APPROVAL_STATUSES, RUN_STATUSES, WEBHOOK_EVENTS } from './records';
import { RUN_SPEC_KEYS, arrayForObject, type RunSpec, RunSpecEntries, TIMEOUT_CAP } from './run-spec';

/**
 * Request schemas. Each validator's message is the problem code it stands for, so the first
 * issue (by the priority below) names both the code and the field.
 */

export const PROMPT_MAX = 16_000;

const CODE_PRIORITY: ProblemCode[] = ['invalid_body', 'prompt_required', 'prompt_too_long', 'invalid_timeout', 'invalid_resume_id'];

function parse<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const issues = result.issues.map((issue) => {
    const field = issue.path?.map((p) => String(p.key)).join('.') ?? '';
    // A missing required key is reported with the object's message; the prompt has its own code.
    const missingPrompt = field === 'prompt' && issue.input === undefined;
    const code = missingPrompt ? 'prompt_required' : CODE_PRIORITY.includes(issue.message as ProblemCode) ? issue.message : 'invalid_body';
    return { code: code as ProblemCode, field, issue };
  });
  issues.sort((a, b) => CODE_PRIORITY.indexOf(a.code) - CODE_PRIORITY.indexOf(b.code));
  const [first] = issues;
  if (!first) throw new Error('a failed parse has an issue');
  const unknown = first.issue.type === 'strict_object' && first.issue.expected === 'never';
  const detail = unknown
    ? `Unknown field "${first.field}".`
    : first.field
      ? `Field "${first.field}" is invalid: ${DETAILS[first.code] ?? ownMessage(first.issue) ?? `expected ${first.issue.expected ?? 'another value'}`}.`
      : 'The body has the wrong shape.';
  throw new HttpProblem(first.code, detail);
}

/** A schema's own words for what it expects (valibot's defaults begin "Invalid"; problem codes have DETAILS). */
const ownMessage = (issue: v.BaseIssue<unknown>): string | undefined =>
  issue.message.startsWith('Invalid ') || issue.message === 'invalid_body' || CODE_PRIORITY.includes(issue.message as ProblemCode) ? undefined : issue.message;

const DETAILS: Partial<Record<ProblemCode, string>> = {
  prompt_required: 'a non-blank prompt is required',
  prompt_too_long: `at most ${PROMPT_MAX} characters`,
  invalid_timeout: `a positive integer number of milliseconds (at most ${TIMEOUT_CAP}; larger values are clamped)`,
  invalid_resume_id: `a string matching ${ID_PATTERN.source}`,
};

/** A schedule's name. */
export const SCHEDULE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/**
 * Names a secret may not take: what changes how a process runs (its loader, shell, Node), the
 * variables every run is given, and the service's own.
 */
const RESERVED_SECRET = /^(PATH|HOME|PWD|SHELL|USER|LOGNAME|TMPDIR|IFS|ENV|BASH_ENV|NODE_OPTIONS|LD_.*|DYLD_.*|HEADLESS_.*|TRACEPARENT|TRACESTATE)$/;
/** Shorter values would be redacted wherever those characters appear. */
export const SECRET_MIN = 8;

/** A secret's value, or the name of one of the operator's secrets (docs/security.md: Per-run secrets). */
const SecretValueSchema = v.union(
  [
    v.pipe(
      v.string(),
      v.minLength(SECRET_MIN, `a value of at least ${SECRET_MIN} characters`),
      v.maxLength(8192),
      v.check((s) => !/[\n\r\0]/.test(s), 'one line: no newline or NUL'),
    ),
    v.strictObject({ secret: v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/)) }),
  ],
  'invalid_body',
);
export type SecretValue = v.InferOutput<typeof SecretValueSchema>;

const SecretsSchema = v.pipe(
  v.record(
    v.pipe(
      v.string(),
      v.regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name'),
      v.check((name) => !RESERVED_SECRET.test(name), 'a name the service keeps for itself'),
    ),
    SecretValueSchema,
    'invalid_body',
  ),
  v.check((secrets) => Object.keys(secrets).length <= 32, 'at most 32 secrets'),
);

/** A start: its prompt, how it is answered, its Session and webhook, and any field of the run spec. */
export const StartBody = v.strictObject(
  {
    prompt: v.pipe(
      v.string('invalid_body'),
      v.check((p) => p.trim() !== '', 'prompt_required'),
      v.maxLength(PROMPT_MAX, 'prompt_too_long'),
    ),
    resumeId: v.optional(v.pipe(v.string('invalid_resume_id'), v.regex(ID_PATTERN, 'invalid_resume_id'))),
    wait: v.optional(v.boolean('invalid_body'), false),
    /** With `resumeId` and a queue: wait in the queue while the Session is busy, instead of `409 session_busy`. */
    waitForSession: v.optional(v.boolean('invalid_body')),
    webhook: v.optional(
      v.strictObject(
        {
          url: v.string('invalid_body'),
          events: v.optional(v.pipe(v.array(v.picklist(WEBHOOK_EVENTS)), v.minLength(1))),
        },
        'invalid_body',
      ),
    ),
    /** Given to this run's agent and checks only, as environment variables; never recorded (docs/security.md: Per-run secrets). */
    secrets: v.optional(SecretsSchema),
    ...RunSpecEntries,
  },
  'invalid_body',
);

export type StartRequest = v.InferOutput<typeof StartBody>;

/** What a start asked of the run spec: its own layer, over its workspace's and its origin's defaults. */
export function specOf(request: Partial<StartRequest>): RunSpec {
  const spec: Record<string, unknown> = {};
  for (const key of RUN_SPEC_KEYS) if (request[key] !== undefined) spec[key] = request[key];
  return spec as RunSpec;
}

export function parseStartBody(body: Record<string, unknown>): StartRequest {
  const array = arrayForObject(body);
  if (array !== undefined) throw new HttpProblem('invalid_body', `Field "${array}" must be an object.`);
  const parsed = parse(StartBody, body);
  if (parsed.resumeId !== undefined && parsed.wait) {
    throw new HttpProblem('resume_requires_async', 'resumeId needs async mode: drop "wait": true.');
  }
  return parsed;
}

/** `POST /api/headless/:taskId/messages`: a follow-up for a running run's agent, given at its next turn. */
export const MessageBody = v.strictObject(
  {
    text: v.pipe(
      v.string('invalid_body'),
      v.check((t) => t.trim() !== '', 'prompt_required'),
      v.maxLength(PROMPT_MAX, 'prompt_too_long'),
    ),
  },
  'invalid_body',
);

export function parseMessageBody(body: Record<string, unknown>): { text: string } {
  return parse(MessageBody, body);
}

/** A page's cursor is the `nextCursor` of the page before: an id of what is listed, never anything else. */
const cursorSchema = (prefix: string) => v.optional(v.pipe(v.string(), v.regex(sortableIdPattern(prefix))));
/**
 * A whole number in a query: sent as digits and read as a number. The OpenAPI document shows it as
 * an integer with its bounds (openapi.ts takes the `openapi` metadata), so a generated client
 * passes a number.
 */
const queryInt = (pattern: RegExp, bounds: { minimum: number; maximum: number }, fallback?: number) => {
  const digits = v.pipe(
    v.string(),
    v.regex(pattern),
    v.metadata({ openapi: { type: 'integer', ...bounds, ...(fallback === undefined ? {} : { default: fallback }) } }),
    v.transform(Number),
    v.maxValue(bounds.maximum),
  );
  return fallback === undefined ? v.optional(digits) : v.optional(digits, String(fallback));
};

/** 1 to 500, as the pattern says too. */
const limitSchema = queryInt(/^([1-9]\d?|[1-4]\d\d|500)$/, { minimum: 1, maximum: 500 }, 50);

export const ListQuery = v.strictObject(
  {
    wsId: v.pipe(v.string(), v.minLength(1)),
    status: v.optional(v.picklist(RUN_STATUSES)),
    limit: limitSchema,
    cursor: cursorSchema('run_'),
    /** `key:value`: only runs whose metadata has it. */
    metadata: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}:[\s\S]{0,256}$/))),
    /** Only runs this schedule started. */
    schedule: v.optional(v.pipe(v.string(), v.regex(SCHEDULE_NAME))),
    /** Only runs this trigger started. */
    trigger: v.optional(v.pipe(v.string(), v.regex(ID_PATTERN))),
    /** Only runs of this agent. */
    agent: v.optional(v.pipe(v.string(), v.regex(ID_PATTERN))),
  },
  'invalid_body',
);

function queryObject(url: URL): Record<string, string> {
  const query: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, value] of url.searchParams) {
    if (key in query) throw new HttpProblem('invalid_body', `Query parameter "${key}" is repeated.`);
    query[key] = value;
  }
  return { ...query };
}

/** The list query, its metadata pair split in two. */
export function parseListQuery(url: URL) {
  const q = parse(ListQuery, queryObject(url));
  const split = q.metadata?.indexOf(':') ?? -1;
  const metadata = q.metadata === undefined ? undefined : { key: q.metadata.slice(0, split), value: q.metadata.slice(split + 1) };
  return {
    workspaceId: q.wsId,
    status: q.status,
    limit: Number(q.limit),
    cursor: q.cursor,
    metadata,
    schedule: q.schedule,
    trigger: q.trigger,
    agent: q.agent,
  };
}

/** The most days `GET /api/usage` sums (about a quarter: each day asked is read from the run records). */
export const USAGE_DAYS_MAX = 90;

/** `GET /api/usage`: the last `days` UTC days, today included; one workspace, or every listed one. */
export const UsageQuery = v.strictObject(
  {
    days: queryInt(/^([1-9]|[1-8]\d|90)$/, { minimum: 1, maximum: USAGE_DAYS_MAX }, 7),
    workspaceId: v.optional(v.pipe(v.string(), v.regex(ID_PATTERN))),
  },
  'invalid_body',
);

export function parseUsageQuery(url: URL): { days: number; workspaceId?: string } {
  const q = parse(UsageQuery, queryObject(url));
  return { days: Number(q.days), ...(q.workspaceId === undefined ? {} : { workspaceId: q.workspaceId }) };
}

/** At most the tail each stream keeps (64 KiB). */
export const OUTPUT_TAIL_MAX = 65_536;

export const OutputQuery = v.strictObject({ tail: queryInt(/^[1-9]\d{0,4}$/, { minimum: 1, maximum: OUTPUT_TAIL_MAX }, OUTPUT_TAIL_MAX) }, 'invalid_body');

export function parseOutputQuery(url: URL): { tail: number } {
  return { tail: Number(parse(OutputQuery, queryObject(url)).tail) };
}

const SEQ = /^(0|[1-9]\d{0,14})$/;

export const EventsQuery = v.strictObject(
  {
    after: queryInt(SEQ, { minimum: 0, maximum: 999_999_999_999_999 }),
    format: v.optional(v.picklist(['json'])),
    limit: queryInt(/^[1-9]\d{0,3}$/, { minimum: 1, maximum: 1000 }, 100),
  },
  'invalid_body',
);

/** `after` from `Last-Event-ID` (a reconnecting EventSource sends it with the first URL), else the query. */
export function parseEventsQuery(url: URL, lastEventId: string | null): { after: number; page: boolean; limit: number } {
  const q = parse(EventsQuery, queryObject(url));
  if (lastEventId !== null && !SEQ.test(lastEventId)) {
    throw new HttpProblem('invalid_body', 'Header "Last-Event-ID" must be the sequence number of an event.');
  }
  return { after: Number(lastEventId ?? q.after ?? 0), page: q.format === 'json', limit: Number(q.limit) };
}

export const AgentsQuery = v.strictObject({ wsId: v.optional(v.pipe(v.string(), v.minLength(1))) }, 'invalid_body');

export function parseAgentsQuery(url: URL): { wsId?: string } {
  return parse(AgentsQuery, queryObject(url));
}

export const InboxQuery = v.strictObject(
  {
    unread: v.optional(v.picklist(['true', 'false'])),
    limit: limitSchema,
    cursor: cursorSchema('inb_'),
  },
  'invalid_body',
);

export function parseInboxQuery(url: URL): { unread: boolean; limit: number; cursor?: string } {
  const q = parse(InboxQuery, queryObject(url));
  return { unread: q.unread === 'true', limit: Number(q.limit), cursor: q.cursor };
}

/** `GET /api/approvals`: with no workspace and no run, every pending question. */
export const ApprovalQuery = v.strictObject(
  {
    workspace: v.optional(v.pipe(v.string(), v.regex(ID_PATTERN))),
    taskId: v.optional(v.pipe(v.string(), v.regex(sortableIdPattern('run_')))),
    status: v.optional(v.picklist(APPROVAL_STATUSES)),
    limit: limitSchema,
    cursor: cursorSchema('apr_'),
  },
  'invalid_body',
);

export interface ApprovalFilter {
  workspace?: string;
  taskId?: string;
  status?: (typeof APPROVAL_STATUSES)[number];
  limit: number;
  cursor?: string;
}

export function parseApprovalQuery(url: URL): ApprovalFilter {
  const q = parse(ApprovalQuery, queryObject(url));
  return { ...q, limit: Number(q.limit) };
}

/** `POST /api/approvals/:id`: allow or deny, once or for the rest of the run (its kind of tool). */
export const ApprovalAnswerBody = v.strictObject(
  { decision: v.picklist(['allow', 'deny']), scope: v.optional(v.picklist(['once', 'run']), 'once') },
  'invalid_body',
);

export function parseApprovalAnswer(body: Record<string, unknown>): { decision: 'allow' | 'deny'; scope: 'once' | 'run' } {
  return parse(ApprovalAnswerBody, body);
}

export const DeliveriesQuery = v.strictObject({ limit: limitSchema, cursor: cursorSchema('dlv_') }, 'invalid_body');

export function parseDeliveriesQuery(url: URL): { limit: number; cursor?: string } {
  const q = parse(DeliveriesQuery, queryObject(url));
  return { limit: Number(q.limit), cursor: q.cursor };
}

export const INBOX_TITLE_MAX = 200;
export const INBOX_BODY_MAX = 64_000;

export const InboxPush = v.strictObject(
  {
    title: v.pipe(
      v.string(),
      v.check((t) => t.trim() !== ''),
      v.maxLength(INBOX_TITLE_MAX),
    ),
    body: v.optional(v.pipe(v.string(), v.maxLength(INBOX_BODY_MAX)), ''),
  },
  'invalid_body',
);

export function parseInboxPush(body: Record<string, unknown>): { title: string; body: string } {
  return parse(InboxPush, body);
}
