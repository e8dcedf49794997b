import type { ReplyAddress } from '../types';
import type { VerifySettings } from './verification';

/** What a delivery says, read the sender's way (docs/triggers.md: Senders). */
export interface DeliveryFacts {
  /** Its kind: `issues.opened`, `incident.triggered`, `issue.created`, `alert`… */
  event?: string;
  /** Where the sender has one: an alert or incident starting, or over. */
  status?: 'firing' | 'resolved';
  /** The sender's id of this delivery, the same on a redelivery. */
  deliveryId?: string;
  /** What identifies "the same incident" across deliveries: its firing and its resolution share it. */
  incident?: string;
  /** What identifies this delivery as a repeat of one already handled: the delivery id, or an alert group's state. */
  dedupeKey?: string;
  /** What the sender's own variable (`slack`, `linear`) gives templates and filters: the delivery's gist, read one way whatever its shape. */
  fields?: Record<string, unknown>;
  /** Why it never starts a run, whatever the filters say (a bot's own message: a reply's echo). */
  skip?: string;
  /** Where a reply about its run goes, where the sender has a place to reply to; `url`, where the delivery names the endpoint (a `response_url`). */
  replyTo?: { address: ReplyAddress; url?: string };
}

export interface Sender {
  /** How it signs, unless the trigger says otherwise. */
  verify?: VerifySettings;
  /** A payload of its shape: templates and filters are checked against it when the config loads. */
  example?: Record<string, unknown>;
  /** Its delivery id is a header its signature does not cover: a repeat is also the same body (docs/triggers.md). */
  unsignedId?: boolean;
  /** It also sends `application/x-www-form-urlencoded` bodies (Slack's slash commands): read as an object of strings. */
  forms?: boolean;
  /** A handshake to answer at once, with no run (Slack's `url_verification`): the answer's body. */
  handshake?(payload: Record<string, unknown>): Record<string, unknown> | undefined;
  read(payload: Record<string, unknown>, headers: Headers): DeliveryFacts;
}
