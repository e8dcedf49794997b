import type { DeliveryFacts, Sender } from './sender';

/**
 * Slack (docs/triggers.md: Slack): the Events API's `event_callback` (`app_mention`, `message`)
 * and slash commands (a form body). Its signature covers the timestamp and the body, so the body's
 * `event_id` (a slash command's `trigger_id`) is a signed delivery id: Slack's retries of an event
 * (`X-Slack-Retry-Num`) carry the same one and start nothing.
 */

type Json = Record<string, unknown>;
const obj = (value: unknown): Json => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});
const text = (value: unknown): string => (typeof value === 'string' ? value : typeof value === 'number' ? String(value) : '');

/** An event of the Events API: its kind (`message.<subtype>` for a subtype), its gist, the thread to reply in. */
function readEvent(payload: Json): DeliveryFacts {
  const event = obj(payload.event);
  const type = text(event.type);
  const subtype = text(event.subtype);
  const channel = text(event.channel);
  const thread = text(event.thread_ts) || text(event.ts);
  const id = text(payload.event_id) || undefined;
  // A bot's message (this trigger's own reply among them) would answer itself for ever.
  const fromBot = event.bot_id !== undefined || subtype === 'bot_message' || obj(event.message).bot_id !== undefined;
  return {
    event: subtype ? `${type}.${subtype}` : type || text(payload.type),
    deliveryId: id,
    dedupeKey: id,
    fields: { text: text(event.text), user: text(event.user), channel, thread, command: '', team: text(payload.team_id) },
    ...(fromBot ? { skip: "a bot's message (a reply's own, perhaps) never starts a run" } : {}),
    ...(channel && thread ? { replyTo: { address: { to: 'slack-thread' as const, channel, threadTs: thread } } } : {}),
  };
}

/** A slash command (`application/x-www-form-urlencoded`): answered later through its `response_url`. */
function readCommand(payload: Json): DeliveryFacts {
  const id = text(payload.trigger_id) || undefined;
  const responseUrl = text(payload.response_url);
  return {
    event: 'command',
    deliveryId: id,
    dedupeKey: id,
    fields: {
      text: text(payload.text),
      user: text(payload.user_id),
      channel: text(payload.channel_id),
      thread: '',
      command: text(payload.command),
      team: text(payload.team_id),
    },
    ...(responseUrl ? { replyTo: { address: { to: 'slack-response' as const }, url: responseUrl } } : {}),
  };
}

export const SLACK: Sender = {
  verify: { method: 'slack' },
  forms: true,
  example: {
    token: 'XXYYZZ',
    team_id: 'T123ABC456',
    api_app_id: 'A123ABC456',
    event: {
      type: 'app_mention',
      user: 'U123ABC456',
      text: '<@U0LAN0Z89> is it everything a river should be?',
      ts: '1515449522.000016',
      channel: 'C123ABC456',
      event_ts: '1515449522.000016',
    },
    type: 'event_callback',
    event_id: 'Ev123ABC456',
    event_time: 1515449522,
  },
  handshake: (payload) => (payload.type === 'url_verification' ? { challenge: text(payload.challenge) } : undefined),
  read: (payload) => (typeof payload.command === 'string' ? readCommand(payload) : readEvent(payload)),
};
