import type { StoredRun, WebhookTarget } from '../types';
import { checkWebhookUrl, postWebhook } from './transport';

/**
 * A trigger's reply where its delivery came from (docs/triggers.md: Replies): the run's outcome,
 * its last message (cut, and escaped so that it can neither ping anyone nor lay out markup) and a
 * link to it, posted as Slack's and Linear's APIs take it. Delivered from the outbox like any
 * webhook (durable, retried, taken over after a restart); the credential is the service's,
 * looked up when it is sent, never stored with the run.
 */

/** What a Linear reply starts with: the Linear sender never starts a run for a comment that does (its own reply's echo). */
export const LINEAR_REPLY_MARK = '**headless-run-webhook**';
/** The last message is cut to this many characters. */
export const REPLY_MESSAGE_MAX = 1500;
const ANSWER_MAX = 2000;
const ZERO_WIDTH = '\u200b';
const LINEAR_COMMENT = 'mutation CommentCreate($input: CommentCreateInput!) { commentCreate(input: $input) { success comment { id } } }';
/** Slack's errors that a later attempt may not meet; any other `ok: false` is the same next time. */
const SLACK_PASSING = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

/** What the service holds for a run's reply: the credential (none for a `response_url`) and the run's link. */
export interface ReplyContext {
  credential?: string;
  link: string;
}

export interface ReplyOutcome {
  status?: number;
  error?: string;
  permanent: boolean;
}

/** Breaks what could ping or link: `@channel`, `@here`, `@someone` and URLs get a zero-width space. */
const defuse = (text: string) => text.replaceAll('@', `@${ZERO_WIDTH}`).replaceAll('://', `:${ZERO_WIDTH}//`);

/** Slack's mrkdwn: `&`, `<`, `>` escaped as Slack says (so no `<!channel>`, `<@U…>` or `<url|label>`), and defused. */
export const slackEscape = (text: string) => defuse(text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;'));

/** Markdown (Linear's): every character that lays out text is backslash-escaped, and defused. */
export const markdownEscape = (text: string) => defuse(text.replace(/[\\`*_[\]{}()#+\-.!<>|~]/g, '\\$&'));

const cut = (text: string) => (text.length > REPLY_MESSAGE_MAX ? `${text.slice(0, REPLY_MESSAGE_MAX)}…` : text);
const quoted = (text: string) =>
  text
    .split('\n')
    .map((line) => `> ${line}`)
    .join('\n');

/** The outcome in words: the status, and the error's code when there is one. */
const outcomeOf = (run: StoredRun) => `${run.status}${run.error ? ` (${run.error.code})` : ''}`;

function slackText(run: StoredRun, link: string): string {
  const head = `Run <${link}|${run.taskId}> ended *${slackEscape(outcomeOf(run))}*`;
  return run.lastMessage ? `${head}\n${quoted(slackEscape(cut(run.lastMessage)))}` : head;
}

function linearBody(run: StoredRun, link: string): string {
  const head = `${LINEAR_REPLY_MARK}: run [${run.taskId}](${link}) ended **${markdownEscape(outcomeOf(run))}**`;
  return run.lastMessage ? `${head}\n\n${quoted(markdownEscape(cut(run.lastMessage)))}` : head;
}

/** The request a reply is: its headers and body, for the target's kind. */
export function replyRequest(run: StoredRun, target: WebhookTarget, context: ReplyContext): { headers: Record<string, string>; body: string } {
  const json = { 'content-type': 'application/json; charset=utf-8', 'user-agent': 'headless-run-webhook' };
  const bearer = { authorization: `Bearer ${context.credential ?? ''}` };
  const text = slackText(run, context.link);
  switch (target.reply?.to) {
    case 'slack-thread': {
      const { channel, threadTs } = target.reply;
      return { headers: { ...json, ...bearer }, body: JSON.stringify({ channel, thread_ts: threadTs, text, unfurl_links: false, unfurl_media: false }) };
    }
    case 'slack-response':
      return { headers: json, body: JSON.stringify({ response_type: 'in_channel', replace_original: false, text }) };
    case 'linear-issue': {
      const key = context.credential ?? '';
      // A personal API key is sent as it is; an OAuth token as a Bearer one (Linear's docs).
      const authorization = key.startsWith('lin_api_') ? key : `Bearer ${key}`;
      const variables = { input: { issueId: target.reply.issueId, body: linearBody(run, context.link) } };
      return { headers: { ...json, authorization }, body: JSON.stringify({ query: LINEAR_COMMENT, variables }) };
    }
    default:
      throw new Error('not a reply target');
  }
}

/**
 * What an answer says. A `429`, a `5xx` or a passing error is tried again; any other refusal
 * would be the same next time. Slack answers its API's errors `200` with `ok: false`; Linear its
 * GraphQL errors with `errors`.
 */
export function replyAnswered(target: WebhookTarget, status: number, answer: string): ReplyOutcome {
  if (status < 200 || status > 299)
    return { status, error: `answered ${status}: ${answer.slice(0, 200)}`, permanent: status < 500 && status !== 429 && status !== 408 };
  if (target.reply?.to === 'slack-thread') {
    if (/^\s*\{\s*"ok"\s*:\s*true/.test(answer)) return { status, permanent: false };
    const error = /"error"\s*:\s*"([^"]{0,100})"/.exec(answer)?.[1] ?? 'an answer without "ok": true';
    return { status, error: `Slack: ${error}`, permanent: !SLACK_PASSING.has(error) };
  }
  if (target.reply?.to === 'linear-issue' && !/"success"\s*:\s*true/.test(answer)) {
    const error = /"message"\s*:\s*"([^"]{0,200})"/.exec(answer)?.[1] ?? 'no "success": true';
    return { status, error: `Linear: ${error}`, permanent: true };
  }
  return { status, permanent: false };
}

/** A target's URL where it may be shown (a record, a log): a `response_url` is a credential, so only its origin. */
export const shownUrl = (target: WebhookTarget) => (target.reply?.to === 'slack-response' ? `${new URL(target.url).origin}/…` : target.url);

/** Posts a reply once. */
export async function sendReply(
  run: StoredRun,
  target: WebhookTarget,
  context: ReplyContext,
  o: { allowPrivate: boolean; timeoutMs: number; signal: AbortSignal },
): Promise<ReplyOutcome> {
  const { headers, body } = replyRequest(run, target, context);
  const answer = await postWebhook(checkWebhookUrl(target.url, o.allowPrivate), headers, body, { ...o, answerMax: ANSWER_MAX });
  return replyAnswered(target, answer.status, answer.answer);
}
