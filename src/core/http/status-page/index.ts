// whatwg-node's Response, as everywhere in the core.
import { Response } from '@whatwg-node/fetch';
// Real files, built in as text (tsup.config.ts, and Vite's own `?raw` in the tests).
import APP from './app.js?raw';
import ICON from './favicon.svg?raw';
import HTML from './page.html?raw';
import { AGENT_RULE_SAID, RUN_EVENT_TYPES } from '../../../contract/records';

/**
 * The status page served at `/` (docs/status-page.md): runs per workspace, live from the event
 * streams, a run's timeline and output tail, the Inbox, cancel and retire. It uses the API like
 * any caller, behind the same gate. Data is only ever set as text (never parsed as HTML), and a
 * strict Content-Security-Policy allows this page's own script only and no framing.
 */

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function statusPage(): Response {
  return new Response(HTML, { status: 200, headers: { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS } });
}

/** Its icon, an SVG (browsers ask for `/favicon.ico` and take whatever image it is). */
export function statusPageIcon(): Response {
  return new Response(ICON, { status: 200, headers: { 'content-type': 'image/svg+xml', ...SECURITY_HEADERS, 'cache-control': 'max-age=86400' } });
}

/** The names the script shares with the API, served ahead of it: one list of event types, one wording of each agent rule. */
const SHARED = `const RUN_EVENT_TYPES = ${JSON.stringify(RUN_EVENT_TYPES)};\nconst AGENT_RULE_SAID = ${JSON.stringify(AGENT_RULE_SAID)};\n`;

export function statusPageScript(): Response {
  return new Response(SHARED + APP, { status: 200, headers: { 'content-type': 'text/javascript; charset=utf-8', ...SECURITY_HEADERS } });
}
