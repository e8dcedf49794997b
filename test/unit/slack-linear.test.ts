import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { markdownEscape, replyAnswered, slackEscape } from '../../src/core/delivery/replies';
import { loadTriggers, type TriggerDefinition, triggerSecrets } from '../../src/core/triggers/trigger-spec';
import { verifyDelivery } from '../../src/core/triggers/verification';
import type { WebhookTarget } from '../../src/core/types';

/** docs/triggers.md: Slack's and Linear's signatures, the replies' escaping, and what their answers mean. */

const hex = (secret: string, data: string) => createHmac('sha256', secret).update(data).digest('hex');
const NOW = 1_800_000_000_000;

describe('Slack signatures', () => {
  const body = '{"type":"event_callback","event_id":"Ev1"}';
  const headers = (ts: number, secret = 's') =>
    new Headers({ 'x-slack-request-timestamp': String(ts), 'x-slack-signature': `v0=${hex(secret, `v0:${ts}:${body}`)}` });
  const ok = (h: Headers, b = body) => verifyDelivery({ method: 'slack' }, 's', b, h, NOW);

  it('take v0= HMAC-SHA256 of v0:timestamp:body within 5 minutes either way', () => {
    expect(ok(headers(NOW / 1000))).toBe(true);
    expect(ok(headers(NOW / 1000 - 300))).toBe(true);
    expect(ok(headers(NOW / 1000 - 301))).toBe(false);
    expect(ok(headers(NOW / 1000 + 301))).toBe(false);
    expect(ok(headers(NOW / 1000, 'other'))).toBe(false);
    expect(ok(headers(NOW / 1000), body.replace('Ev1', 'Ev2'))).toBe(false);
    // The timestamp is signed: another one with the same signature is refused.
    const moved = headers(NOW / 1000);
    moved.set('x-slack-request-timestamp', String(NOW / 1000 - 1));
    expect(ok(moved)).toBe(false);
  });
});

describe('Linear signatures', () => {
  const body = (at: number) => JSON.stringify({ type: 'Issue', action: 'create', webhookTimestamp: at });
  const ok = (b: string, secret = 's') => verifyDelivery({ method: 'linear' }, 's', b, new Headers({ 'linear-signature': hex(secret, b) }), NOW);

  it("take the hex HMAC of the body with the body's webhookTimestamp within 60 seconds", () => {
    expect(ok(body(NOW))).toBe(true);
    expect(ok(body(NOW - 60_000))).toBe(true);
    expect(ok(body(NOW - 60_001))).toBe(false);
    expect(ok(body(NOW), 'other')).toBe(false);
    expect(ok(JSON.stringify({ type: 'Issue' }))).toBe(false);
  });
});

describe("a reply's text", () => {
  it('Slack: no <!channel>, <@U…>, <url|…>, @here or link gets through', () => {
    expect(slackEscape('<!channel> <@U1> <https://x|y> @here a&b https://x')).toBe(
      '&lt;!channel&gt; &lt;@\u200bU1&gt; &lt;https:\u200b//x|y&gt; @\u200bhere a&amp;b https:\u200b//x',
    );
  });

  it('Linear: no markdown, mention or link gets through', () => {
    expect(markdownEscape('# *a* [l](https://x) @jane `c`')).toBe('\\# \\*a\\* \\[l\\]\\(https:\u200b//x\\) @\u200bjane \\`c\\`');
  });
});

describe("a reply's answer", () => {
  const thread: WebhookTarget = {
    url: 'https://slack.com/api/chat.postMessage',
    events: ['run.ended'],
    source: 'reply',
    reply: { to: 'slack-thread', channel: 'C', threadTs: '1' },
  };
  const issue: WebhookTarget = { url: 'https://api.linear.app/graphql', events: ['run.ended'], source: 'reply', reply: { to: 'linear-issue', issueId: 'i' } };

  it("is Slack's ok: true, or an error given up (retried when it passes: ratelimited)", () => {
    expect(replyAnswered(thread, 200, '{"ok":true,"ts":"1"}')).toEqual({ status: 200, permanent: false });
    expect(replyAnswered(thread, 200, '{"ok":false,"error":"not_in_channel"}')).toEqual({ status: 200, error: 'Slack: not_in_channel', permanent: true });
    expect(replyAnswered(thread, 200, '{"ok":false,"error":"ratelimited"}')).toMatchObject({ permanent: false });
    expect(replyAnswered(thread, 429, '')).toMatchObject({ permanent: false });
    expect(replyAnswered(thread, 503, '')).toMatchObject({ permanent: false });
    expect(replyAnswered(thread, 404, '')).toMatchObject({ permanent: true });
  });

  it("is Linear's success: true, or its GraphQL error", () => {
    expect(replyAnswered(issue, 200, '{"data":{"commentCreate":{"success":true}}}')).toEqual({ status: 200, permanent: false });
    expect(replyAnswered(issue, 200, '{"errors":[{"message":"Entity not found"}]}')).toEqual({
      status: 200,
      error: 'Linear: Entity not found',
      permanent: true,
    });
  });
});

describe("a trigger's reply settings", () => {
  const slack = (reply: TriggerDefinition['reply']): TriggerDefinition => ({ name: 't', workspace: 'ws', sender: 'slack', secret: 's', prompt: 'p', reply });
  const load = (d: TriggerDefinition, env: NodeJS.ProcessEnv = { SLACK_BOT_TOKEN: 'xoxb-1' }) => loadTriggers([d], () => true, env);

  it('are refused unless they are for its sender, and need their credential', () => {
    expect(() => load(slack({ linear: { apiKey: 'k' } }))).toThrow('triggers[0].reply must be { "slack": … } for a slack sender');
    expect(() => load(slack({ slack: { token: { env: 'SLACK_BOT_TOKEN' } } }), {})).toThrow(
      'triggers[0].reply.slack.token is empty (environment variable SLACK_BOT_TOKEN is not set)',
    );
    expect(() => load(slack({ slack: { token: 'x' }, publicUrl: 'not a url' }))).toThrow('triggers[0].reply.publicUrl must be an http(s) URL');
    expect(load(slack({ slack: { token: { env: 'SLACK_BOT_TOKEN' } } })).get('t')?.reply).toEqual({
      kind: 'slack',
      credential: 'xoxb-1',
      apiUrl: 'https://slack.com/api',
    });
  });

  it('hold a credential no run may see: by value, and by the variable it is read from', () => {
    expect(triggerSecrets([slack({ slack: { token: { env: 'SLACK_BOT_TOKEN' } } })], { SLACK_BOT_TOKEN: 'xoxb-1' })).toEqual({
      names: ['SLACK_BOT_TOKEN'],
      values: ['s', 'xoxb-1'],
    });
  });
});
