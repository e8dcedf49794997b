import * as v from 'valibot';

/**
 * @module The run spec: everything a run can be asked, declared once (docs/internals.md: The run
 * spec). A start's body extends it; a workspace, a schedule and a trigger carry a partial spec as
 * their runs' defaults (`run` in the config file); the record keeps the spec as it was resolved.
 * A new per-run option is one entry here plus its use: the OpenAPI document, the config file, the
 * client's types and MCP's `start_run` all read these entries. Each validator's message is the
 * problem code it stands for (requests.ts reports the first).
 */

export const TIMEOUT_DEFAULT = 300_000;
export const TIMEOUT_CAP = 1_800_000;
/** A run's label: what the status page, the list and the CLI show instead of its id. */
export const TITLE_MAX = 200;
/** A run's metadata: at most 16 string pairs, keys like `team` or `alert.id`, values at most 256 characters. */
export const METADATA_KEYS_MAX = 16;
export const METADATA_KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const METADATA_VALUE_MAX = 256;
/** A git ref a worktree is made from: a branch, tag, commit or `HEAD~2`; never an option, a range or a path. */
export const GIT_REF = /^(?!.*\.\.)(?!.*@\{)[A-Za-z0-9_][A-Za-z0-9._/~^-]{0,199}$/;
/** A placement provider's name, what `isolation` names (checked against the registered ones at start). */
export const PLACEMENT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

export const PERMISSIONS = ['full', 'ask', 'read-only'] as const;
export type Permissions = (typeof PERMISSIONS)[number];

const positiveInt = v.pipe(v.number('invalid_body'), v.integer('invalid_body'), v.minValue(1, 'invalid_body'));

/** How a run under `permissions: "ask"` is answered (docs/approvals.md); unset fields come from the layer below. */
export const ApprovalSettingsSchema = v.strictObject(
  {
    /** A question unanswered this long gets the fallback. @default 900000 */
    timeoutMs: v.optional(positiveInt),
    /** @default "deny" */
    fallback: v.optional(v.picklist(['allow', 'deny'], 'invalid_body')),
    /** Answered without asking, the first that matches; none matches: a caller is asked. */
    rules: v.optional(
      v.array(
        v.strictObject(
          {
            kinds: v.optional(v.pipe(v.array(v.string('invalid_body'), 'invalid_body'), v.minLength(1, 'invalid_body'))),
            paths: v.optional(
              v.pipe(
                v.array(
                  v.pipe(
                    v.string('invalid_body'),
                    v.check((p) => p !== '' && !p.startsWith('/') && !p.split(/[\\/]/).includes('..'), 'invalid_body'),
                  ),
                  'invalid_body',
                ),
                v.minLength(1, 'invalid_body'),
              ),
            ),
            answer: v.picklist(['allow', 'deny'], 'invalid_body'),
          },
          'invalid_body',
        ),
        'invalid_body',
      ),
    ),
  },
  'invalid_body',
);

/** A check's name: what the record, the timeline and the agent are told. */
export const CHECK_NAME = /^[A-Za-z0-9][A-Za-z0-9 _.:-]{0,63}$/;
/** At most this many checks, and this many attempts (the first included). */
export const VERIFY_CHECKS_MAX = 10;
export const VERIFY_ATTEMPTS_MAX = 10;
/** How much of a check's output goes back to the agent and onto the record, by default and at most (characters, its tail). */
export const CHECK_OUTPUT_DEFAULT = 4000;
export const CHECK_OUTPUT_MAX = 16_000;
/** A grader's rubric, at most. */
export const RUBRIC_MAX = 8000;

/**
 * The verify loop (docs/verify.md): checks the service runs itself, in the run's own folder and
 * confinement, after the agent ends its turn as a success; on failure the same Session is asked
 * again with what failed, up to `maxAttempts`.
 */
export const VerifySchema = v.pipe(
  v.strictObject(
    {
      checks: v.optional(
        v.pipe(
          v.array(
            v.strictObject(
              {
                name: v.pipe(v.string('invalid_body'), v.regex(CHECK_NAME, 'invalid_body')),
                /** A shell command, run with `sh -c` in the run's working directory; exit 0 passes. */
                command: v.pipe(v.string('invalid_body'), v.minLength(1, 'invalid_body'), v.maxLength(4000, 'invalid_body')),
                /** @default 300000, and never past the run's own time */
                timeoutMs: v.optional(positiveInt),
                /** Characters of its output's tail shown to the agent and kept on the record. @default 4000 */
                outputChars: v.optional(v.pipe(positiveInt, v.maxValue(CHECK_OUTPUT_MAX, 'invalid_body'))),
              },
              'invalid_body',
            ),
            'invalid_body',
          ),
          v.minLength(1, 'invalid_body'),
          v.maxLength(VERIFY_CHECKS_MAX, 'invalid_body'),
          v.check((checks) => new Set(checks.map((c) => c.name)).size === checks.length, 'invalid_body'),
        ),
      ),
      /**
       * A rubric grader, once the checks pass: a second, read-only run of its own (any agent) that
       * sees the rubric and the change, never the worker's conversation, and answers a verdict.
       */
      grader: v.optional(
        v.strictObject(
          {
            rubric: v.pipe(
              v.string('invalid_body'),
              v.check((r) => r.trim() !== '', 'invalid_body'),
              v.maxLength(RUBRIC_MAX, 'invalid_body'),
            ),
            /** @default the workspace's selection */
            agent: v.optional(v.string('invalid_body')),
            /** @default 300000, and never past the run's own time */
            timeoutMs: v.optional(positiveInt),
          },
          'invalid_body',
        ),
      ),
      /** Attempts at most, the first included. @default 3 */
      maxAttempts: v.optional(v.pipe(positiveInt, v.maxValue(VERIFY_ATTEMPTS_MAX, 'invalid_body'))),
      /** When the checks still fail at the end: the run `fail`s (`verify_failed`, `verify_stalled`), or ends as its agent did, with the verdict recorded. @default "fail" */
      onExhausted: v.optional(v.picklist(['fail', 'keep'], 'invalid_body')),
    },
    'invalid_body',
  ),
  v.check((verify) => verify.checks !== undefined || verify.grader !== undefined, 'invalid_body'),
);

/** A branch a pull request merges into: a branch name, never an option, a range or a revision expression. */
export const BRANCH_NAME = /^(?!.*\.\.)(?!.*@\{)(?!.*\/\/)(?!.*\.lock$)[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$/;
/** A pull request's title, at most. */
export const PR_TITLE_MAX = 256;

/**
 * Publishing a run in a worktree once it has `succeeded` (docs/worktrees.md: Publishing): its
 * branch pushed to its workspace's remote, and a pull (merge) request opened where its workspace
 * has a forge. Where to, and with which credential, is its workspace's `publishTo`, never a run's.
 */
export const PublishSchema = v.pipe(
  v.strictObject(
    {
      /** Push its branch. @default true */
      push: v.optional(v.boolean('invalid_body')),
      /** Open a pull request from its branch, once pushed. */
      pullRequest: v.optional(
        v.strictObject(
          {
            /** @default true */
            draft: v.optional(v.boolean('invalid_body')),
            /** The branch it merges into. @default the forge's default branch */
            base: v.optional(v.pipe(v.string('invalid_body'), v.regex(BRANCH_NAME, 'invalid_body'))),
            /** @default the run's title, else "headless-run-webhook: run <taskId>" */
            title: v.optional(
              v.pipe(
                v.string('invalid_body'),
                v.check((t) => t.trim() !== '', 'invalid_body'),
                v.maxLength(PR_TITLE_MAX, 'invalid_body'),
              ),
            ),
          },
          'invalid_body',
        ),
      ),
    },
    'invalid_body',
  ),
  // A pull request needs the branch pushed.
  v.check((p) => !(p.push === false && p.pullRequest !== undefined), 'invalid_body'),
);
export type PublishSpec = v.InferOutput<typeof PublishSchema>;

export const RunSpecEntries = {
  /** The agent that runs it. @default the workspace's selection (docs/http-api.md: Agent selection) */
  agent: v.optional(v.string('invalid_body')),
  /** Stopped, `timed_out`, after this long (larger values are clamped to 30 minutes). @default 300000 */
  timeoutMs: v.optional(
    v.pipe(
      v.number('invalid_timeout'),
      v.integer('invalid_timeout'),
      v.minValue(1, 'invalid_timeout'),
      v.transform((ms) => Math.min(ms, TIMEOUT_CAP)),
    ),
  ),
  /** Its label. */
  title: v.optional(
    v.pipe(
      v.string('invalid_body'),
      v.check((t) => t.trim() !== '', 'invalid_body'),
      v.maxLength(TITLE_MAX, 'invalid_body'),
    ),
  ),
  /** String pairs the list filters by. */
  metadata: v.optional(
    v.pipe(
      v.record(
        v.pipe(v.string(), v.regex(METADATA_KEY, 'invalid_body')),
        v.pipe(v.string('invalid_body'), v.maxLength(METADATA_VALUE_MAX, 'invalid_body')),
        'invalid_body',
      ),
      v.check((m) => Object.keys(m).length <= METADATA_KEYS_MAX, 'invalid_body'),
    ),
  ),
  /**
   * What its agent may do (docs/security.md: Confining agents): `read-only` (edits and commands
   * forbidden), `ask` (each permission answered by `approvals`, else a caller), `full`. A start may
   * make it stricter than its workspace's, never looser. @default "full"
   */
  permissions: v.optional(v.picklist(PERMISSIONS, 'invalid_body')),
  /** Under `permissions: "ask"`: its questions' timeout and fallback, and rules that answer without asking. */
  approvals: v.optional(ApprovalSettingsSchema),
  /** Run its agent in a bubblewrap sandbox; a start may ask for one, never turn its workspace's off. @default false */
  sandbox: v.optional(v.boolean('invalid_body')),
  /**
   * The placement provider that places it: `none` (its workspace's folder), `worktree` (a git
   * worktree of its own, on its Session's branch: docs/worktrees.md), or one the handler registered. @default "none"
   */
  isolation: v.optional(v.pipe(v.string('invalid_body'), v.regex(PLACEMENT_NAME, 'invalid_body'))),
  /** The ref its worktree is made from. @default "HEAD" */
  ref: v.optional(v.pipe(v.string('invalid_body'), v.regex(GIT_REF, 'invalid_body'))),
  /** A JSON Schema its answer must match: the answer is the record's `result` (docs/structured-output.md). */
  outputSchema: v.optional(v.record(v.string(), v.unknown(), 'invalid_body')),
  /** Its budget: stopped, `failed` with `budget_exceeded`, at this many tool calls, tokens or dollars (docs/http-api.md: Budgets). */
  maxTurns: v.optional(positiveInt),
  maxTokens: v.optional(positiveInt),
  maxCostUsd: v.optional(v.pipe(v.number('invalid_body'), v.gtValue(0, 'invalid_body'), v.finite('invalid_body'))),
  /** Stopped (`timed_out`, `stalled`) after this long without a line on stdout. @default the installation's */
  stallTimeoutMs: v.optional(positiveInt),
  /** Stopped (`failed`, `memory_limit`) when its processes hold more resident memory. @default the installation's */
  maxMemoryMb: v.optional(positiveInt),
  /** Checks the service runs after the agent's turn, asking it again until they pass (docs/verify.md). */
  verify: v.optional(VerifySchema),
  /** Once it has succeeded in a worktree: push its branch, open a pull request (docs/worktrees.md: Publishing). */
  publish: v.optional(PublishSchema),
};

/** A partial spec: a layer of defaults (a workspace's, a schedule's, a trigger's) or what a start asked. */
export const RunSpecSchema = v.strictObject(RunSpecEntries, 'invalid_body');
export type RunSpec = v.InferOutput<typeof RunSpecSchema>;
export type RunSpecKey = keyof RunSpec;
export const RUN_SPEC_KEYS = Object.keys(RunSpecEntries) as RunSpecKey[];

/**
 * Limits a start may only tighten, never loosen, below what its workspace, schedule or trigger
 * set (docs/security.md: Confining agents): the operator's confinement and ceilings.
 */
export const CEILINGS = ['maxTurns', 'maxTokens', 'maxCostUsd', 'stallTimeoutMs', 'maxMemoryMb'] as const;

/** A JSON array passes valibot's record (as "0", "1"…): the spec field given one where an object belongs, if any. */
export function arrayForObject(input: Record<string, unknown>): string | undefined {
  return (['metadata', 'outputSchema', 'approvals'] as const).find((key) => Array.isArray(input[key]));
}
