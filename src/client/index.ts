import * as v from 'valibot';
import { ANSWERS } from '../contract/answers';
import type { RunEvent } from '../contract/events';
import { HeadlessError, RETRIED_STATUS, answer, pages, query, sleep } from './http';
import { sseData } from './sse';
import { nodeFetch } from './node-fetch';

export { HeadlessError, type ClientErrorCode } from './http';
import type { StartBody } from '../contract/requests';
import {
  type AgentRule,
  type ApprovalRecord,
  type InboxItem,
  type RunRecord,
  type RunSecret,
  type RunSource,
  type RunStatus,
  type SessionView,
  hasEnded,
} from '../contract/records';

/**
 * The typed client of the HTTP API (docs/client.md). Every answer is checked against the
 * same valibot schemas the server's OpenAPI document is made from; every error is a
 * `HeadlessError` whose `code` is the problem code.
 */

export type { AgentRule, ApprovalRecord, InboxItem, RunEvent, RunRecord, RunSecret, RunSource, RunStatus, SessionView };

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:47331` (with its mount path, if any), or `unix:/path/to.sock` (Node only). */
  url: string;
  /** The admin token (`HEADLESS_ADMIN_TOKEN`), or a run token; none for a local caller. */
  token?: string;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
  /** How many times a start is retried (with the same `Idempotency-Key`) after a network error or a 502/503/504. @default 3 */
  startRetries?: number;
}

/** The fields of a start request (its `wait` is chosen by the overload of `start`). */
export type StartOptions = Omit<v.InferInput<typeof StartBody>, 'wait'>;

export type StartAccepted = v.InferOutput<typeof ANSWERS.StartAccepted>;
export type MessageAccepted = v.InferOutput<typeof ANSWERS.MessageAccepted>;
export type SyncResult = v.InferOutput<typeof ANSWERS.SyncResult>;
export type RunOutput = v.InferOutput<typeof ANSWERS.RunOutput>;
export type RunChangesView = v.InferOutput<typeof ANSWERS.RunChanges>;
export type WorkspaceUsage = v.InferOutput<typeof ANSWERS.WorkspaceUsage>;
export type UsageReport = v.InferOutput<typeof ANSWERS.UsageReport>;
export type AgentsReport = v.InferOutput<typeof ANSWERS.AgentsReport>;

export interface HeadlessClient {
  /** Starts a run; resolves once it is recorded (`202`), or with `wait: true` once it has ended. */
  start(workspaceId: string, options: StartOptions & { wait?: false }, request?: { idempotencyKey?: string }): Promise<StartAccepted>;
  start(workspaceId: string, options: StartOptions & { wait: true }, request?: { idempotencyKey?: string }): Promise<SyncResult>;
  get(taskId: string): Promise<RunRecord>;
  /** Every run of a workspace, newest first, a page at a time. */
  list(
    workspaceId: string,
    options?: { status?: RunStatus; pageSize?: number; metadata?: string; schedule?: string; trigger?: string; agent?: string },
  ): AsyncIterable<RunRecord>;
  /** One page; `metadata: "key:value"` keeps the runs whose metadata has it. */
  listPage(
    workspaceId: string,
    options?: { status?: RunStatus; limit?: number; cursor?: string; metadata?: string; schedule?: string; trigger?: string; agent?: string },
  ): Promise<v.InferOutput<typeof ANSWERS.RunList>>;
  cancel(taskId: string): Promise<RunRecord>;
  /** A follow-up for a running run's agent, given as its next turn's prompt (docs/http-api.md: Follow-ups). */
  message(taskId: string, text: string): Promise<MessageAccepted>;
  output(taskId: string, tail?: number): Promise<RunOutput>;
  /** What a run in a worktree changed, with its patch, once it has ended (docs/worktrees.md). */
  changes(taskId: string): Promise<RunChangesView>;
  /** A run's events from `after` on, live until `run.ended`; reconnects (with Last-Event-ID) if the stream drops. */
  events(taskId: string, options?: { after?: number; signal?: AbortSignal }): AsyncIterable<RunEvent>;
  /** The final record: follows the event stream, or polls the record if the stream cannot be had. */
  wait(taskId: string, options?: { signal?: AbortSignal; pollMs?: number; onEvent?: (event: RunEvent) => void }): Promise<RunRecord>;
  agents(workspaceId?: string): Promise<AgentsReport>;
  /** A workspace's runs and spend today (UTC), with its daily limits. */
  usage(workspaceId: string): Promise<WorkspaceUsage>;
  /** Runs, tokens and spend per UTC day (today first; `days` 1–90, default 7): one workspace's, or every listed one's (docs/http-api.md: Usage). */
  usage(options?: { days?: number; workspaceId?: string }): Promise<UsageReport>;
  inbox: {
    list(workspaceId: string, options?: { unread?: boolean; pageSize?: number }): AsyncIterable<InboxItem>;
    listPage(workspaceId: string, options?: { unread?: boolean; limit?: number; cursor?: string }): Promise<v.InferOutput<typeof ANSWERS.InboxList>>;
    push(workspaceId: string, item: { title: string; body?: string }): Promise<InboxItem>;
    get(workspaceId: string, itemId: string): Promise<InboxItem>;
    markRead(workspaceId: string, itemId: string): Promise<InboxItem>;
  };
  /** The questions of runs under `permissions: "ask"` (docs/approvals.md). */
  approvals: {
    /** Newest first: a workspace's, a run's, or (with neither) every pending one. */
    list(options?: {
      workspace?: string;
      taskId?: string;
      status?: ApprovalRecord['status'];
      limit?: number;
      cursor?: string;
    }): Promise<v.InferOutput<typeof ANSWERS.ApprovalList>>;
    get(approvalId: string): Promise<ApprovalRecord>;
    /** Allow or deny; `scope: "run"` answers every later question of the same kind in its run. */
    answer(approvalId: string, answer: { decision: 'allow' | 'deny'; scope?: 'once' | 'run' }): Promise<ApprovalRecord>;
  };
  sessions: {
    get(resumeId: string): Promise<SessionView>;
    retire(resumeId: string): Promise<SessionView>;
  };
  schedules: {
    /** Each schedule with its next occurrence and last run. */
    list(): Promise<v.InferOutput<typeof ANSWERS.ScheduleList>>;
    /** Starts a run of the schedule now. */
    run(name: string): Promise<StartAccepted>;
  };
  triggers: {
    /** Each trigger: its workspace, sender, verification, whether it is enabled (never its secret). */
    list(): Promise<v.InferOutput<typeof ANSWERS.TriggerList>>;
    /** A page of a trigger's deliveries, newest first: what became of each. */
    deliveries(name: string, options?: { limit?: number; cursor?: string }): Promise<v.InferOutput<typeof ANSWERS.DeliveryList>>;
  };
}

/** How the client reaches the service: one request, and one request whose answer is checked against its schema. */
interface Transport {
  send(method: string, path: string, body?: unknown, extra?: Record<string, string>, signal?: AbortSignal): Promise<Response>;
  call<S extends v.GenericSchema>(schema: S, method: string, path: string, body?: unknown): Promise<v.InferOutput<S>>;
}

const enc = encodeURIComponent;

function transport(options: ClientOptions): Transport {
  const socket = /^unix:(\/.+)$/.exec(options.url)?.[1];
  const base = socket ? 'http://localhost' : options.url.replace(/\/+$/, '');
  const doFetch = options.fetch ?? (socket ? nodeFetch({ socketPath: socket }) : globalThis.fetch);
  const headers = (extra: Record<string, string> = {}) => ({ ...(options.token ? { authorization: `Bearer ${options.token}` } : {}), ...extra });
  const send: Transport['send'] = async (method, path, body, extra = {}, signal) => {
    try {
      return await doFetch(`${base}${path}`, {
        method,
        headers: headers(body === undefined ? extra : { 'content-type': 'application/json', ...extra }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      const reason = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
      throw new HeadlessError(0, 'network', `cannot reach ${base}: ${reason}`);
    }
  };
  return { send, call: async (schema, method, path, body) => answer(await send(method, path, body), schema) };
}

/** A start, retried on a network failure or a busy answer under one Idempotency-Key, so a retry never starts a second run. */
function starter(t: Transport, retries: number) {
  return async (workspaceId: string, body: StartOptions & { wait?: boolean }, request: { idempotencyKey?: string } = {}) => {
    const key = request.idempotencyKey ?? crypto.randomUUID();
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await t.send('POST', `/api/workspaces/${enc(workspaceId)}/headless`, body, { 'idempotency-key': key });
      } catch (error) {
        if (attempt < retries && error instanceof HeadlessError && error.code === 'network') {
          await sleep(250 * 2 ** attempt);
          continue;
        }
        throw error;
      }
      if (attempt < retries && RETRIED_STATUS.has(res.status)) {
        await res.body?.cancel();
        await sleep(250 * 2 ** attempt);
        continue;
      }
      return body.wait ? answer(res, ANSWERS.SyncResult) : answer(res, ANSWERS.StartAccepted);
    }
  };
}

/** A run's events from `after` on, live until `run.ended`; reconnects (with Last-Event-ID) if the stream drops. */
function eventStream(t: Transport): HeadlessClient['events'] {
  return async function* events(taskId, o = {}) {
    let after = o.after ?? 0;
    // Reconnects after a dropped stream, a bounded number of times in a row.
    for (let drops = 0; drops < 5; ) {
      const headers = { accept: 'text/event-stream', 'last-event-id': String(after) };
      const res = await t.send('GET', `/api/headless/${enc(taskId)}/events`, undefined, headers, o.signal);
      if (!res.ok || !res.body) await answer(res, ANSWERS.RunEvent);
      let progressed = false;
      try {
        for await (const data of sseData(res.body as ReadableStream<Uint8Array>, o.signal)) {
          const event = v.parse(ANSWERS.RunEvent, JSON.parse(data)) as RunEvent;
          after = event.seq;
          progressed = true;
          yield event;
          if (event.type === 'run.ended') return;
        }
        // The stream ended without run.ended: the run's timeline ended elsewhere (e.g. a shutdown).
        return;
      } catch (error) {
        if (o.signal?.aborted) return;
        if (error instanceof v.ValiError || error instanceof SyntaxError) throw new HeadlessError(200, 'invalid_answer', `unexpected event: ${error.message}`);
        drops = progressed ? 1 : drops + 1;
        await sleep(500 * drops, o.signal);
      }
    }
    throw new HeadlessError(0, 'network', `the event stream of ${taskId} kept dropping`);
  };
}

/** The final record: follows the event stream, or polls the record if the stream cannot be had. */
function waiter(events: HeadlessClient['events'], get: HeadlessClient['get']): HeadlessClient['wait'] {
  return async (taskId, o = {}) => {
    try {
      for await (const event of events(taskId, { signal: o.signal })) {
        o.onEvent?.(event);
        if (event.type === 'run.ended') return event.data;
      }
    } catch (error) {
      // A problem about the run itself (404) is the answer; anything else falls back to polling.
      if (error instanceof HeadlessError && error.status >= 400 && error.status < 500) throw error;
    }
    for (;;) {
      const record = await get(taskId);
      if (hasEnded(record.status) || o.signal?.aborted) return record;
      await sleep(o.pollMs ?? 1000, o.signal);
    }
  };
}

function inboxApi({ call }: Transport): HeadlessClient['inbox'] {
  const listPage: HeadlessClient['inbox']['listPage'] = (workspaceId, o = {}) =>
    call(ANSWERS.InboxList, 'GET', `/api/workspaces/${enc(workspaceId)}/inbox${query({ unread: o.unread, limit: o.limit, cursor: o.cursor })}`);
  return {
    list: (workspaceId, o = {}) =>
      pages(async (cursor) => {
        const page = await listPage(workspaceId, { unread: o.unread, limit: o.pageSize, cursor });
        return { items: page.items, next: page.nextCursor };
      }),
    listPage,
    push: (workspaceId, item) => call(ANSWERS.InboxItem, 'POST', `/api/workspaces/${enc(workspaceId)}/inbox`, item),
    get: (workspaceId, itemId) => call(ANSWERS.InboxItem, 'GET', `/api/workspaces/${enc(workspaceId)}/inbox/${enc(itemId)}`),
    markRead: (workspaceId, itemId) => call(ANSWERS.InboxItem, 'POST', `/api/workspaces/${enc(workspaceId)}/inbox/${enc(itemId)}/read`),
  };
}

export function createClient(options: ClientOptions): HeadlessClient {
  const t = transport(options);
  const { call } = t;
  const get = (taskId: string) => call(ANSWERS.RunRecord, 'GET', `/api/headless/${enc(taskId)}`) as Promise<RunRecord>;
  const listPage: HeadlessClient['listPage'] = (workspaceId, o = {}) =>
    call(
      ANSWERS.RunList,
      'GET',
      `/api/headless${query({ wsId: workspaceId, status: o.status, limit: o.limit, cursor: o.cursor, metadata: o.metadata, schedule: o.schedule, trigger: o.trigger, agent: o.agent })}`,
    );
  const events = eventStream(t);
  return {
    start: starter(t, options.startRetries ?? 3) as HeadlessClient['start'],
    get,
    listPage,
    list: (workspaceId, o = {}) =>
      pages(async (cursor) => {
        const page = await listPage(workspaceId, {
          status: o.status,
          limit: o.pageSize,
          cursor,
          metadata: o.metadata,
          schedule: o.schedule,
          trigger: o.trigger,
          agent: o.agent,
        });
        return { items: page.runs as RunRecord[], next: page.nextCursor };
      }),
    cancel: (taskId) => call(ANSWERS.RunRecord, 'POST', `/api/headless/${enc(taskId)}/cancel`) as Promise<RunRecord>,
    message: (taskId, text) => call(ANSWERS.MessageAccepted, 'POST', `/api/headless/${enc(taskId)}/messages`, { text }),
    output: (taskId, tail) => call(ANSWERS.RunOutput, 'GET', `/api/headless/${enc(taskId)}/output${query({ tail })}`),
    changes: (taskId) => call(ANSWERS.RunChanges, 'GET', `/api/headless/${enc(taskId)}/changes`),
    usage: ((asked?: string | { days?: number; workspaceId?: string }) =>
      typeof asked === 'string'
        ? call(ANSWERS.WorkspaceUsage, 'GET', `/api/workspaces/${enc(asked)}/usage`)
        : call(ANSWERS.UsageReport, 'GET', `/api/usage${query({ days: asked?.days, workspaceId: asked?.workspaceId })}`)) as HeadlessClient['usage'],
    events,
    wait: waiter(events, get),
    agents: (workspaceId) => call(ANSWERS.AgentsReport, 'GET', `/api/agents${query({ wsId: workspaceId })}`),
    inbox: inboxApi(t),
    approvals: {
      list: (o = {}) => call(ANSWERS.ApprovalList, 'GET', `/api/approvals${query(o)}`),
      get: (id) => call(ANSWERS.Approval, 'GET', `/api/approvals/${enc(id)}`),
      answer: (id, given) => call(ANSWERS.Approval, 'POST', `/api/approvals/${enc(id)}`, given),
    },
    sessions: {
      get: (resumeId) => call(ANSWERS.SessionView, 'GET', `/api/sessions/${enc(resumeId)}`),
      retire: (resumeId) => call(ANSWERS.SessionView, 'POST', `/api/sessions/${enc(resumeId)}/retire`),
    },
    schedules: {
      list: () => call(ANSWERS.ScheduleList, 'GET', '/api/schedules'),
      run: (name) => call(ANSWERS.StartAccepted, 'POST', `/api/schedules/${enc(name)}/run`),
    },
    triggers: {
      list: () => call(ANSWERS.TriggerList, 'GET', '/api/triggers'),
      deliveries: (name, options = {}) => call(ANSWERS.DeliveryList, 'GET', `/api/triggers/${enc(name)}/deliveries${query(options)}`),
    },
  };
}
