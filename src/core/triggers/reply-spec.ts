import type { ReplyContext } from '../delivery/replies';
import type { ReplyAddress } from '../types';
import { type SecretSource, readSecret } from '../util/secret-source';
import type { DeliveryFacts } from './sender';

/** A trigger's reply where its delivery came from, when its run ends (docs/triggers.md: Replies). */
export interface ReplySettings {
  /** Slack: the bot token (`xoxb-…`) that posts in the thread; a slash command is answered through its `response_url`. */
  slack?: { token: SecretSource; apiUrl?: string };
  /** Linear: the API key (or OAuth token) that comments on the issue. */
  linear?: { apiKey: SecretSource; apiUrl?: string };
  /** Where people reach the daemon: the reply links to `<publicUrl>/#<taskId>` (the status page). @default the API URL runs are given */
  publicUrl?: string;
}

/** A reply ready to be addressed: the credential is read once, at load. */
export interface LoadedReply {
  kind: 'slack' | 'linear';
  credential: string;
  /** Slack's Web API base (`…/chat.postMessage` is under it), or Linear's GraphQL endpoint. */
  apiUrl: string;
  publicUrl?: string;
}

/** The APIs' own addresses; `apiUrl` is for tests and proxies only. */
const SLACK_API = 'https://slack.com/api';
const LINEAR_API = 'https://api.linear.app/graphql';
/** Where Slack's `response_url`s point. */
const SLACK_HOOKS = 'https://hooks.slack.com';

function urlOf(value: string, where: string): URL {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // Said below.
  }
  throw new Error(`${where} must be an http(s) URL`);
}

/** Loads a trigger's `reply`; throws, naming where, on one its sender cannot use. */
export function loadReply(reply: ReplySettings, sender: string, where: string, env: NodeJS.ProcessEnv): LoadedReply {
  const kinds = (['slack', 'linear'] as const).filter((kind) => reply[kind] !== undefined);
  const [kind] = kinds;
  if (kind === undefined || kinds.length > 1 || kind !== sender)
    throw new Error(`${where} must be { "${sender}": … } for a ${sender} sender (only slack and linear reply)`);
  const publicUrl = reply.publicUrl === undefined ? undefined : urlOf(reply.publicUrl, `${where}.publicUrl`).href.replace(/\/$/, '');
  const given = kind === 'slack' ? reply.slack?.apiUrl : reply.linear?.apiUrl;
  const apiUrl = given === undefined ? (kind === 'slack' ? SLACK_API : LINEAR_API) : urlOf(given, `${where}.${kind}.apiUrl`).href.replace(/\/$/, '');
  const source = kind === 'slack' ? reply.slack?.token : reply.linear?.apiKey;
  const name = kind === 'slack' ? 'token' : 'apiKey';
  if (source === undefined) throw new Error(`${where}.${kind}.${name} is required`);
  return { kind, credential: readSecret(source, `${where}.${kind}.${name}`, env), apiUrl, ...(publicUrl ? { publicUrl } : {}) };
}

/** The reply's credentials' sources, for runs never to see. */
export const replySources = (reply: ReplySettings | undefined): SecretSource[] =>
  [reply?.slack?.token, reply?.linear?.apiKey].filter((s): s is SecretSource => s !== undefined);

/**
 * Where a delivery's reply is posted, or undefined when it names no place. A `response_url` is
 * taken only on Slack's own host (or the configured `apiUrl`'s), so a delivery cannot send the
 * reply elsewhere.
 */
export function replyTarget(reply: LoadedReply, facts: DeliveryFacts): { url: string; address: ReplyAddress } | undefined {
  const to = facts.replyTo;
  if (to === undefined) return undefined;
  if (to.address.to === 'slack-thread') return { url: `${reply.apiUrl}/chat.postMessage`, address: to.address };
  if (to.address.to === 'linear-issue') return { url: reply.apiUrl, address: to.address };
  let url: URL;
  try {
    url = new URL(to.url ?? '');
  } catch {
    return undefined;
  }
  return url.origin === SLACK_HOOKS || url.origin === new URL(reply.apiUrl).origin ? { url: url.href, address: to.address } : undefined;
}

/** What the outbox needs to send a run's reply: the credential and the run's link. */
export const replyContext = (reply: LoadedReply, taskId: string, apiUrl: string): ReplyContext => ({
  credential: reply.credential,
  link: `${reply.publicUrl ?? apiUrl.replace(/\/$/, '')}/#${taskId}`,
});
