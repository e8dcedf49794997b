import * as v from 'valibot';
import { HttpProblem } from '../../../contract/problems';
import { ANSWERS } from '../../../contract/answers';
import {
  EventsQuery,
  ListQuery,
  MessageBody,
  OutputQuery,
  StartBody,
  parseEventsQuery,
  parseListQuery,
  parseMessageBody,
  parseOutputQuery,
  parseStartBody,
} from '../../../contract/requests';
import { StillPending } from '../../runs/lifecycle';
import { isTraceparent } from '../../telemetry/run-tracing';
import { readEmptyBody, readJsonObject } from '../body';
import { eventStreamResponse } from '../event-stream';
import { type RouteVerifier, unauthorized } from '../auth';
import { accepted, idempotentStart } from '../idempotent-start';
import { type HttpAnswer, type Route, answer, json, route } from '../router';

/** A caller, or the run itself with its own run token (another run's is refused). */
const OWN_RUN: RouteVerifier = {
  name: "caller or the run's own token",
  runTokens: 'any',
  security: [{}, { adminToken: [] }, { runToken: [] }],
  async verify(request, { auth, gate, customGate, params }) {
    const { credential } = auth;
    if (credential.kind === 'run' && credential.grant.taskId !== params.taskId) throw unauthorized();
    // A custom gate is never asked about run tokens; the default one still checks Host and Origin.
    if (customGate && credential.kind === 'run') return;
    if (!(await gate(request, auth))) throw unauthorized();
  },
};

/**
 * A caller waiting for its run when the service stops: the run is durable and goes on later.
 * `status` is the HTTP status (RFC 9457), so the run's own is `runStatus`; `Location` names it.
 * Thrown past the idempotency key, whose retry is answered from the run.
 */
const stillPending = (pending: StillPending, location: Record<string, string>) =>
  new HttpProblem('shutting_down', pending.message, {
    extra: { taskId: pending.record.taskId, runStatus: pending.record.status },
    headers: location,
    retryAfterSeconds: 5,
  });

/** Runs: start, list, read, output, events, cancel. */
export const RUN_ROUTES: Route[] = [
  route(
    {
      name: 'runs.start',
      method: 'POST',
      path: '/api/workspaces/:workspaceId/headless',
      auth: 'caller',
      doc: {
        summary: 'Start a run',
        body: StartBody,
        headers: [{ name: 'Idempotency-Key', description: '1–255 printable ASCII characters: a retry with the same body gets the first answer.' }],
        responses: {
          202: { description: 'Started (async); Location names the run.', schema: ANSWERS.StartAccepted },
          200: { description: 'Ended (sync, `wait: true`).', schema: ANSWERS.SyncResult },
        },
        problems: [
          'invalid_body',
          'prompt_required',
          'prompt_too_long',
          'invalid_timeout',
          'invalid_resume_id',
          'agent_unknown',
          'agent_not_headless',
          'agent_disabled',
          'no_headless_agent',
          'resume_requires_async',
          'invalid_idempotency_key',
          'invalid_webhook',
          'webhook_not_allowed',
          'policy_loosened',
          'verify_unsupported',
          'workspace_not_found',
          'session_not_found',
          'session_other_workspace',
          'session_busy',
          'session_retired',
          'session_not_resumable',
          'idempotency_key_in_use',
          'body_too_large',
          'unsupported_media_type',
          'idempotency_key_reused',
          'capacity_reached',
          'queue_full',
          'spawn_failed',
          'shutting_down',
        ],
      },
    },
    async ({ request, params, services, apiUrl, basePath }) => {
      const body = await readJsonObject(request);
      const start = parseStartBody(body);
      const location = (taskId: string) => ({ location: `${basePath}/api/headless/${encodeURIComponent(taskId)}` });
      const execute = async (taskId?: string): Promise<HttpAnswer> => {
        const workspace = await services.workspaceToStart(params.workspaceId);
        const traceparent = request.headers.get('traceparent') ?? undefined;
        const origin = traceparent !== undefined && isTraceparent(traceparent) ? { traceparent } : {};
        const { record, done } = await services.runs.start({ workspace, request: start, apiUrl, taskId, origin });
        if (!start.wait) return { status: 202, body: accepted(record), headers: location(record.taskId) };
        const result = await done;
        return { status: 200, body: { ...result.record, output: result.output }, headers: {} };
      };
      const key = request.headers.get('idempotency-key');
      try {
        if (key === null) return answer(await execute());
        const once = idempotentStart(execute, services.runs, location);
        // Not even a hash of a secret's value is kept: a retry is the same start whatever values it repeats.
        const named = (v: unknown) => (typeof v === 'string' ? 'a value' : v);
        const kept = start.secrets ? { ...body, secrets: Object.fromEntries(Object.entries(start.secrets).map(([k, v]) => [k, named(v)])) } : body;
        const { answer: first, replayed } = await services.idempotency.once(params.workspaceId, key, kept, once);
        return answer(first, replayed ? { 'idempotent-replayed': 'true' } : {});
      } catch (error) {
        throw error instanceof StillPending ? stillPending(error, location(error.record.taskId)) : error;
      }
    },
  ),
  route(
    {
      name: 'runs.list',
      method: 'GET',
      path: '/api/headless',
      auth: 'caller',
      doc: {
        summary: 'List the runs of a workspace, newest first',
        query: ListQuery,
        responses: { 200: { description: 'A page.', schema: ANSWERS.RunList } },
        problems: ['invalid_body', 'workspace_not_found'],
      },
    },
    async ({ url, services }) => {
      const query = parseListQuery(url);
      await services.workspace(query.workspaceId);
      return json(await services.runs.list(query));
    },
  ),
  route(
    {
      name: 'runs.get',
      method: 'GET',
      path: '/api/headless/:taskId',
      auth: 'caller',
      doc: { summary: 'Read a run', responses: { 200: { description: 'The run record.', schema: ANSWERS.RunRecord } }, problems: ['run_not_found'] },
    },
    async ({ params, services }) => json(await services.runs.get(params.taskId)),
  ),
  route(
    {
      name: 'runs.output',
      method: 'GET',
      path: '/api/headless/:taskId/output',
      auth: 'caller',
      doc: {
        summary: "The tail of a run's output",
        query: OutputQuery,
        responses: { 200: { description: 'The last bytes of stdout and stderr.', schema: ANSWERS.RunOutput } },
        problems: ['invalid_body', 'run_not_found'],
      },
    },
    async ({ url, params, services }) => json(await services.runs.output(params.taskId, parseOutputQuery(url).tail)),
  ),
  route(
    {
      name: 'runs.result',
      method: 'POST',
      path: '/api/headless/:taskId/result',
      auth: OWN_RUN,
      doc: {
        summary: "A running run's answer, from its agent (`headless-inbox result`): checked against its outputSchema; a match ends the run",
        body: v.object({ value: v.unknown() }),
        responses: { 200: { description: 'It matches: the run ends with it as its result.', schema: ANSWERS.ResultAccepted } },
        problems: ['invalid_body', 'run_not_found', 'run_not_running', 'output_invalid'],
      },
    },
    async ({ request, params, services }) => {
      const body = await readJsonObject(request);
      if (!('value' in body)) throw new HttpProblem('invalid_body', 'The body must be {"value": <the answer>}.');
      return json(await services.runs.submitResult(params.taskId, body.value));
    },
  ),
  route(
    {
      name: 'workspaces.usage',
      method: 'GET',
      path: '/api/workspaces/:workspaceId/usage',
      auth: 'caller',
      doc: {
        summary: "A workspace's runs and spend today (UTC), with its daily limits, and each schedule's and trigger's in it",
        responses: { 200: { description: 'Today, so far.', schema: ANSWERS.WorkspaceUsage } },
        problems: ['workspace_not_found'],
      },
    },
    async ({ params, services }) => json(await services.runs.usage(await services.workspace(params.workspaceId))),
  ),
  route(
    {
      name: 'runs.changes',
      method: 'GET',
      path: '/api/headless/:taskId/changes',
      auth: 'caller',
      doc: {
        summary: 'What a run in a worktree changed, and its patch (docs/worktrees.md)',
        responses: { 200: { description: 'Its branch, base and head commits, changed files and patch.', schema: ANSWERS.RunChanges } },
        problems: ['run_not_found', 'changes_not_found'],
      },
    },
    async ({ params, services }) => json(await services.runs.changes(params.taskId)),
  ),
  route(
    {
      name: 'runs.events',
      method: 'GET',
      path: '/api/headless/:taskId/events',
      auth: 'caller',
      doc: {
        summary: "A run's events: Server-Sent Events, JSON lines (Accept: application/x-ndjson) or a page (format=json)",
        query: EventsQuery,
        headers: [{ name: 'Last-Event-ID', description: 'Replay the events after this sequence number (wins over `after`).' }],
        responses: {
          200: {
            description: 'With `format=json`: a page. Otherwise a stream of RunEvent, as SSE or one JSON object per line.',
            schema: ANSWERS.EventPage,
            stream: ANSWERS.RunEvent,
          },
        },
        problems: ['invalid_body', 'run_not_found'],
      },
    },
    async ({ request, url, params, services }) => {
      const query = parseEventsQuery(url, request.headers.get('last-event-id'));
      const record = await services.runs.get(params.taskId);
      const { taskId } = record;
      if (query.page) {
        const page = await services.events.page(record, query.after, query.limit);
        const last = page.events.at(-1)?.seq ?? query.after;
        return json({ taskId, events: page.events, ended: page.ended, nextAfter: page.ended ? null : last });
      }
      const ndjson = (request.headers.get('accept') ?? '').includes('application/x-ndjson');
      return eventStreamResponse(services.events.reader(record, query.after), ndjson ? 'ndjson' : 'sse', services.heartbeatMs);
    },
  ),
  route(
    {
      name: 'runs.cancel',
      method: 'POST',
      path: '/api/headless/:taskId/cancel',
      auth: 'caller',
      doc: {
        summary: 'Cancel a running run',
        responses: { 202: { description: 'Stopping; the record.', schema: ANSWERS.RunRecord } },
        problems: ['run_not_found', 'run_not_running', 'run_owner_unreachable', 'invalid_body', 'unsupported_media_type'],
      },
    },
    async ({ request, params, services }) => {
      await readEmptyBody(request);
      return json(await services.runs.cancel(params.taskId), 202);
    },
  ),
  route(
    {
      name: 'runs.message',
      method: 'POST',
      path: '/api/headless/:taskId/messages',
      auth: 'caller',
      doc: {
        summary: "A follow-up for a running run's agent: given to it as its next turn's prompt, on the same Session",
        body: MessageBody,
        responses: { 202: { description: 'Taken for its next turn.', schema: ANSWERS.MessageAccepted } },
        problems: [
          'run_not_found',
          'run_not_running',
          'run_cannot_continue',
          'run_owner_unreachable',
          'rate_limited',
          'invalid_body',
          'prompt_required',
          'prompt_too_long',
          'unsupported_media_type',
          'body_too_large',
        ],
      },
    },
    async ({ request, params, services }) => {
      const { text } = parseMessageBody(await readJsonObject(request));
      return json(await services.runs.message(params.taskId, text), 202);
    },
  ),
];
