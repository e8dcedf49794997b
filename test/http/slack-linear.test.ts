import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http, HttpResponse } from 'msw';
import { setupServer } from 'msw/node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentAdapter } from '../../src/core/agents/types';
import type { TriggerDefinition } from '../../src/core/triggers/trigger-spec';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/** docs/triggers.md: Slack and Linear deliveries, signed as they sign, and the replies their runs post back (slack.com and api.linear.app faked with msw). */

const SLACK_SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const LINEAR_SECRET = 'lin_wh_a-linear-webhook-secret';
const hex = (secret: string, data: string) => createHmac('sha256', secret).update(data).digest('hex');
const now = () => Math.floor(Date.now() / 1000);

/** What the agent says last: everything a reply must not let through (a ping, a mention, markup, a link). */
const HOSTILE = 'Fixed it <!channel> @here ask <@U999> *now* [x](https://evil.example/p) ok';
const claude = BUILTIN_AGENTS.find((a) => a.name === 'claude') as AgentAdapter;
const SAY = `const out = (e) => process.stdout.write(JSON.stringify({ session_id: 's-1', ...e }) + '\\n');
out({ type: 'system', subtype: 'init' });
out({ type: 'result', subtype: 'success', result: ${JSON.stringify(HOSTILE)}, usage: { input_tokens: 1, output_tokens: 1 } });`;
/** Claude Code's adapter over a script that ends with the hostile message. */
const sayer: AgentAdapter = { ...claude, name: 'sayer', identity: undefined, invocation: () => ({ command: process.execPath, args: ['-e', SAY] }) };
const echo = { command: '/bin/sh', args: ['-c', 'cat'], stdin: '{prompt}' };

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hrw-slack-linear-'));
});
afterEach(() => closeAllHosts());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const slack = (extra: Partial<TriggerDefinition> = {}): TriggerDefinition => ({
  name: 'slack',
  workspace: 'ws',
  sender: 'slack',
  run: { agent: 'echo' },
  secret: SLACK_SECRET,
  prompt: '{{ slack.command }} {{ slack.text }} from {{ slack.user }} in {{ slack.channel }} thread {{ slack.thread }}',
  ...extra,
});
const linear = (extra: Partial<TriggerDefinition> = {}): TriggerDefinition => ({
  name: 'linear',
  workspace: 'ws',
  sender: 'linear',
  run: { agent: 'echo' },
  secret: LINEAR_SECRET,
  prompt: 'Work on {{ linear.identifier }}: {{ payload.data.title }}',
  ...extra,
});

const host = (triggers: TriggerDefinition[]) =>
  createTestHost({
    workspaces: [{ id: 'ws', path: dir, agents: ['echo', 'sayer'] }],
    agents: { echo, sayer },
    triggers,
    apiUrl: 'http://127.0.0.1:47331',
  });

const mention = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    token: 'XXYYZZ',
    team_id: 'T1',
    api_app_id: 'A1',
    type: 'event_callback',
    event_id: 'Ev0001',
    event_time: now(),
    event: { type: 'app_mention', user: 'U1', text: '<@UAPP> fix the login', ts: '1700000000.000100', channel: 'C1', event_ts: '1700000000.000100' },
    ...over,
  });
const slashCommand = (responseUrl = 'https://hooks.slack.com/commands/T1/123/abc') =>
  new URLSearchParams({
    token: 'XXYYZZ',
    team_id: 'T1',
    channel_id: 'C2',
    user_id: 'U2',
    command: '/agent',
    text: 'fix the build',
    response_url: responseUrl,
    trigger_id: '1335.7384.8088',
  }).toString();

const slackHeaders = (body: string, ts = now(), secret = SLACK_SECRET) => ({
  'x-slack-request-timestamp': String(ts),
  'x-slack-signature': `v0=${hex(secret, `v0:${ts}:${body}`)}`,
});

async function send(h: TestHost, trigger: string, body: string, headers: Record<string, string>, type = 'application/json') {
  const res = await h.request('POST', `/api/triggers/${trigger}`, { body, headers: { 'content-type': type, ...headers } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
const record = async (h: TestHost, taskId: string) => (await (await h.request('GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
const output = async (h: TestHost, taskId: string) => ((await (await h.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string }).stdout;
async function ended(h: TestHost, taskId: string) {
  await waitFor(async () => !['queued', 'running'].includes((await record(h, taskId)).status), { what: 'the run to end' });
  return record(h, taskId);
}

describe('Slack deliveries', () => {
  it('a signed mention starts a run whose prompt reads its text, user, channel and thread; Slack gets a 200', async () => {
    const h = await host([slack()]);
    const body = mention();
    const first = await send(h, 'slack', body, slackHeaders(body));
    expect(first).toMatchObject({ status: 200, body: { outcome: 'started' } });
    await waitFor(async () => (await output(h, first.body.taskId)).includes('fix the login'), { what: 'the prompt' });
    expect(await output(h, first.body.taskId)).toContain('⟦⟧ ⟦<@UAPP> fix the login⟧ from ⟦U1⟧ in ⟦C1⟧ thread ⟦1700000000.000100⟧');
  });

  it("Slack's retries of an event (X-Slack-Retry-Num, the same event_id) start nothing", async () => {
    const h = await host([slack()]);
    const body = mention();
    const first = await send(h, 'slack', body, slackHeaders(body));
    const retry = await send(h, 'slack', body, { ...slackHeaders(body), 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
    expect(retry).toMatchObject({ status: 200, body: { outcome: 'deduplicated', taskId: first.body.taskId } });
  });

  it('a wrong signature, a stale timestamp (over 5 minutes) or none is 401, whatever the body', async () => {
    const h = await host([slack()]);
    const body = mention();
    expect((await send(h, 'slack', body, slackHeaders(body, now(), 'not-the-secret'))).status).toBe(401);
    expect((await send(h, 'slack', body, slackHeaders(body, now() - 301))).status).toBe(401);
    expect((await send(h, 'slack', body, { 'x-slack-signature': slackHeaders(body)['x-slack-signature'] })).status).toBe(401);
    // Within 5 minutes is fine.
    expect((await send(h, 'slack', body, slackHeaders(body, now() - 240))).status).toBe(200);
  });

  it('url_verification is answered with its challenge, once signed; no run, no log row', async () => {
    const h = await host([slack()]);
    const body = JSON.stringify({ token: 'XXYYZZ', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
    expect(await send(h, 'slack', body, slackHeaders(body))).toEqual({
      status: 200,
      body: { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' },
    });
    expect((await send(h, 'slack', body, slackHeaders(body, now(), 'wrong'))).status).toBe(401);
    const log = (await (await h.request('GET', '/api/triggers/slack/deliveries')).json()) as { deliveries: unknown[] };
    expect(log.deliveries).toEqual([]);
  });

  it('a slash command (form-encoded) starts a run; its user is told at once, to them alone', async () => {
    const h = await host([slack()]);
    const body = slashCommand();
    const res = await send(h, 'slack', body, slackHeaders(body), 'application/x-www-form-urlencoded');
    expect(res).toMatchObject({ status: 200, body: { outcome: 'started', response_type: 'ephemeral', text: `Run ${res.body.taskId} started.` } });
    await waitFor(async () => (await output(h, res.body.taskId)).includes('fix the build'), { what: 'the prompt' });
    expect(await output(h, res.body.taskId)).toContain('⟦/agent⟧ ⟦fix the build⟧ from ⟦U2⟧ in ⟦C2⟧ thread ⟦⟧');
    // Forms are Slack's alone.
    const github = await h.request('POST', '/api/triggers/slack', { body, headers: { 'content-type': 'text/plain', ...slackHeaders(body) } });
    expect(github.status).toBe(415);
  });

  it("a bot's message (a reply's echo) never starts a run, whatever the filters", async () => {
    const h = await host([slack()]);
    const body = mention({ event: { type: 'message', bot_id: 'B1', text: 'Run … ended', ts: '1.2', channel: 'C1' } });
    expect(await send(h, 'slack', body, slackHeaders(body))).toMatchObject({ status: 200, body: { outcome: 'filtered' } });
  });
});

const issueUpdate = (over: { labels?: Array<{ id: string; name: string }>; updatedFrom?: Record<string, unknown>; timestamp?: number } = {}) =>
  JSON.stringify({
    action: 'update',
    type: 'Issue',
    actor: { id: 'u-1', type: 'user', name: 'Jane' },
    createdAt: new Date().toISOString(),
    webhookTimestamp: over.timestamp ?? Date.now(),
    webhookId: 'wh-1',
    url: 'https://linear.app/acme/issue/ENG-1/login',
    data: {
      id: 'issue-uuid-1',
      identifier: 'ENG-1',
      title: 'Login fails',
      assigneeId: 'agent-id',
      assignee: { id: 'agent-id', name: 'Agent' },
      labelIds: (over.labels ?? []).map((l) => l.id),
      labels: over.labels ?? [],
    },
    updatedFrom: over.updatedFrom ?? { assigneeId: null, updatedAt: '2026-01-01T00:00:00.000Z' },
  });
const linearHeaders = (body: string, delivery: string, secret = LINEAR_SECRET) => ({
  'linear-signature': hex(secret, body),
  'linear-delivery': delivery,
  'linear-event': 'Issue',
});

describe('Linear deliveries', () => {
  it('a signed one starts a run; the same Linear-Delivery again starts nothing', async () => {
    const h = await host([linear()]);
    const body = issueUpdate();
    const first = await send(h, 'linear', body, linearHeaders(body, 'd-1'));
    expect(first).toMatchObject({ status: 202, body: { outcome: 'started' } });
    expect(await send(h, 'linear', body, linearHeaders(body, 'd-1'))).toMatchObject({ body: { outcome: 'deduplicated', taskId: first.body.taskId } });
    await waitFor(async () => (await output(h, first.body.taskId)).includes('Login fails'), { what: 'the prompt' });
    expect(await output(h, first.body.taskId)).toContain('Work on ⟦ENG-1⟧: ⟦Login fails⟧');
  });

  it('a wrong signature, or a webhookTimestamp over 60 seconds away, is 401', async () => {
    const h = await host([linear()]);
    const body = issueUpdate();
    expect((await send(h, 'linear', body, linearHeaders(body, 'd-1', 'not-the-secret'))).status).toBe(401);
    const stale = issueUpdate({ timestamp: Date.now() - 61_000 });
    expect((await send(h, 'linear', stale, linearHeaders(stale, 'd-2'))).status).toBe(401);
    const fresh = issueUpdate({ timestamp: Date.now() - 30_000 });
    expect((await send(h, 'linear', fresh, linearHeaders(fresh, 'd-3'))).status).toBe(202);
  });

  it('`when` selects "assigned to Agent" and "label agent added", not an update that changed neither', async () => {
    const assigned = linear({ name: 'assigned', when: { event: 'Issue.update', 'linear.assignedTo.name': 'Agent' } });
    const labelled = linear({ name: 'labelled', when: { event: 'Issue.update', 'linear.labelsAdded[]': 'agent' } });
    const h = await host([assigned, labelled]);
    const label = { id: 'l-1', name: 'agent' };
    const added = issueUpdate({ labels: [label], updatedFrom: { labelIds: [] } });
    const kept = issueUpdate({ labels: [label], updatedFrom: { labelIds: ['l-1'], title: 'old' } });
    const reassigned = issueUpdate({ updatedFrom: { assigneeId: null } });
    expect((await send(h, 'labelled', added, linearHeaders(added, 'l-a'))).body.outcome).toBe('started');
    expect((await send(h, 'labelled', kept, linearHeaders(kept, 'l-k'))).body).toMatchObject({
      outcome: 'filtered',
      reason: 'linear.labelsAdded[] does not match',
    });
    expect((await send(h, 'assigned', reassigned, linearHeaders(reassigned, 'a-r'))).body.outcome).toBe('started');
    expect((await send(h, 'assigned', kept, linearHeaders(kept, 'a-k'))).body.outcome).toBe('filtered');
  });
});

describe('replies where the delivery came from (slack.com and api.linear.app faked with msw)', () => {
  const seen: Array<{ url: string; headers: Record<string, string>; body: string }> = [];
  let slackAnswer: Record<string, unknown> = { ok: true, channel: 'C1', ts: '1700000001.000200', message: { text: 'x' } };
  const server = setupServer(
    http.post('https://slack.com/api/chat.postMessage', async ({ request }) => {
      seen.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text() });
      return HttpResponse.json(slackAnswer);
    }),
    http.post('https://hooks.slack.com/commands/*', async ({ request }) => {
      seen.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text() });
      return HttpResponse.text('ok');
    }),
    http.post('https://api.linear.app/graphql', async ({ request }) => {
      seen.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text() });
      return HttpResponse.json({ data: { commentCreate: { success: true, comment: { id: 'c-1' } } } });
    }),
  );
  beforeAll(() => server.listen({ onUnhandledRequest: 'error' }));
  afterEach(() => {
    seen.length = 0;
    slackAnswer = { ok: true, channel: 'C1', ts: '1700000001.000200', message: { text: 'x' } };
  });
  afterAll(() => server.close());

  const slackReply = (extra: Partial<TriggerDefinition> = {}) =>
    slack({ run: { agent: 'sayer' }, reply: { slack: { token: { env: 'SLACK_BOT_TOKEN' } }, publicUrl: 'https://agents.example.com' }, ...extra });
  const replyHost = (triggers: TriggerDefinition[]) =>
    createTestHost({
      workspaces: [{ id: 'ws', path: dir, agents: ['echo', 'sayer'] }],
      agents: { echo, sayer },
      triggers,
      env: { ...process.env, SLACK_BOT_TOKEN: 'xoxb-a-bot-token', LINEAR_API_KEY: 'lin_api_a-linear-key' },
    });
  async function delivered(h: TestHost, taskId: string) {
    await ended(h, taskId);
    await waitFor(async () => ['delivered', 'failed'].includes((await record(h, taskId)).webhooks?.[0]?.state), { what: 'the reply' });
    return (await record(h, taskId)).webhooks[0];
  }

  it('a mention is answered in its thread: chat.postMessage with the bot token, the outcome, the escaped last message, the link', async () => {
    const h = await replyHost([slackReply()]);
    const body = mention();
    const { body: answer } = await send(h, 'slack', body, slackHeaders(body));
    expect(await delivered(h, answer.taskId)).toMatchObject({ state: 'delivered', url: 'https://slack.com/api/chat.postMessage', attempts: 1 });
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.url).toBe('https://slack.com/api/chat.postMessage');
    expect(request?.headers.authorization).toBe('Bearer xoxb-a-bot-token');
    const sent = JSON.parse(request?.body ?? '{}');
    const z = '\u200b';
    expect(sent).toEqual({
      channel: 'C1',
      thread_ts: '1700000000.000100',
      unfurl_links: false,
      unfurl_media: false,
      text:
        `Run <https://agents.example.com/#${answer.taskId}|${answer.taskId}> ended *succeeded*\n` +
        `> Fixed it &lt;!channel&gt; @${z}here ask &lt;@${z}U999&gt; *now* [x](https:${z}//evil.example/p) ok`,
    });
  });

  it("a slash command is answered through its response_url (no token), which the run's record never shows", async () => {
    const h = await replyHost([slackReply()]);
    const body = slashCommand();
    const { body: answer } = await send(h, 'slack', body, slackHeaders(body), 'application/x-www-form-urlencoded');
    expect(answer.text).toBe(`Run ${answer.taskId} started: its outcome is posted here when it ends.`);
    expect(await delivered(h, answer.taskId)).toMatchObject({ state: 'delivered', url: 'https://hooks.slack.com/…' });
    expect(seen[0]?.url).toBe('https://hooks.slack.com/commands/T1/123/abc');
    expect(seen[0]?.headers.authorization).toBeUndefined();
    expect(JSON.parse(seen[0]?.body ?? '{}')).toMatchObject({
      response_type: 'in_channel',
      replace_original: false,
      text: expect.stringContaining('&lt;!channel&gt;'),
    });
  });

  it("a response_url anywhere but Slack's host is not taken: the run ends without a reply", async () => {
    const h = await replyHost([slackReply()]);
    const body = slashCommand('https://evil.example/collect');
    const { body: answer } = await send(h, 'slack', body, slackHeaders(body), 'application/x-www-form-urlencoded');
    expect((await ended(h, answer.taskId)).webhooks).toBeUndefined();
    expect(seen).toEqual([]);
  });

  it("Slack's ok: false (channel_not_found) is given up at once, visibly", async () => {
    slackAnswer = { ok: false, error: 'channel_not_found' };
    const h = await replyHost([slackReply()]);
    const body = mention();
    const { body: answer } = await send(h, 'slack', body, slackHeaders(body));
    expect(await delivered(h, answer.taskId)).toMatchObject({ state: 'failed', attempts: 1, lastError: 'Slack: channel_not_found' });
  });

  it('a Linear issue gets a comment: commentCreate with the API key, the escaped last message, the link', async () => {
    const h = await replyHost([
      linear({ run: { agent: 'sayer' }, reply: { linear: { apiKey: { env: 'LINEAR_API_KEY' } }, publicUrl: 'https://agents.example.com/' } }),
    ]);
    const body = issueUpdate();
    const { body: answer } = await send(h, 'linear', body, linearHeaders(body, 'd-9'));
    expect(await delivered(h, answer.taskId)).toMatchObject({ state: 'delivered', url: 'https://api.linear.app/graphql' });
    const [request] = seen;
    expect(request?.headers.authorization).toBe('lin_api_a-linear-key');
    const sent = JSON.parse(request?.body ?? '{}');
    expect(sent.query).toContain('commentCreate(input: $input)');
    const z = '\u200b';
    expect(sent.variables).toEqual({
      input: {
        issueId: 'issue-uuid-1',
        body:
          `**headless-run-webhook**: run [${answer.taskId}](https://agents.example.com/#${answer.taskId}) ended **succeeded**\n\n` +
          `> Fixed it \\<\\!channel\\> @${z}here ask \\<@${z}U999\\> \\*now\\* \\[x\\]\\(https:${z}//evil\\.example/p\\) ok`,
      },
    });
    // The reply's own comment, sent back by Linear, starts nothing.
    const echoed = JSON.stringify({
      ...JSON.parse(issueUpdate()),
      type: 'Comment',
      action: 'create',
      data: { id: 'c-1', issueId: 'issue-uuid-1', body: sent.variables.input.body },
    });
    expect((await send(h, 'linear', echoed, linearHeaders(echoed, 'd-10'))).body.outcome).toBe('filtered');
  });
});
