import { ANSWERS } from '../../../contract/answers';
import { HttpProblem } from '../../../contract/problems';
import { DeliveriesQuery, parseDeliveriesQuery } from '../../../contract/requests';
import { standIn } from '../../triggers/stand-in';
import type { Trigger } from '../../triggers/trigger-spec';
import { verifyDelivery } from '../../triggers/verification';
import type { RouteVerifier } from '../auth';
import { readLimited } from '../body';
import { FailedAttempts } from '../failed-attempts';
import type { RouteServices } from '../route-services';
import { type Route, answer, json, route } from '../router';

/** What the sender's verifier read and let in, for the route's handler: the body is read once. */
interface VerifiedDelivery {
  trigger: Trigger;
  body: string;
}

/** Each handler's count of unverified deliveries per peer address (several handlers may share a process). */
const failures = new WeakMap<RouteServices, FailedAttempts>();
function failuresOf(services: RouteServices): FailedAttempts {
  const known = failures.get(services);
  if (known) return known;
  const made = new FailedAttempts();
  failures.set(services, made);
  return made;
}

/**
 * A sender's delivery is let in by its trigger's own verification alone (docs/triggers.md):
 * no admin token, no gate, and it opens nothing but its trigger. An unknown trigger, a disabled
 * one and a wrong signature get the same `401` after the same steps (a name with no enabled
 * trigger is checked against a stand-in, the way its headers claim), so an outsider learns
 * nothing of which exist. A peer that sends 10 unverified deliveries in a minute is refused
 * `429 too_many_attempts` for the rest of it, whatever it sends.
 */
export const SENDER_SIGNATURE: RouteVerifier<VerifiedDelivery> = {
  name: 'sender signature',
  runTokens: 'none',
  security: [{ senderSignature: [] }],
  async verify(request, { params, services, auth }) {
    const throttle = failuresOf(services);
    throttle.check(auth.remoteAddress);
    const name = params.name ?? '';
    const trigger = services.triggers.get(name);
    const body = await readLimited(request);
    const check = trigger ?? standIn(request.headers);
    const ok = verifyDelivery(check.verify, check.secret, body, request.headers);
    if (!trigger || !ok) {
      throttle.record(auth.remoteAddress);
      services.triggers.refusedUnverified(name, auth.remoteAddress);
      throw new HttpProblem('unauthorized', 'This delivery could not be verified.');
    }
    return { trigger, body };
  },
};

/** What a slash command's user is told at once. */
const acknowledged = (d: { outcome: string; taskId?: string; reason?: string }, replies: boolean) =>
  d.outcome === 'started' || d.outcome === 'queued' || d.outcome === 'deduplicated'
    ? `Run ${d.taskId ?? ''} ${d.outcome === 'deduplicated' ? 'already started' : d.outcome}${replies ? ': its outcome is posted here when it ends' : ''}.`
    : `Nothing started: ${d.reason ?? d.outcome}.`;

/** Triggers (docs/triggers.md): senders' deliveries, the list, each one's deliveries log. */
export const TRIGGER_ROUTES: Route[] = [
  route(
    {
      name: 'triggers.deliver',
      method: 'POST',
      path: '/api/triggers/:name',
      auth: SENDER_SIGNATURE,
      doc: {
        summary: "Take a sender's delivery (Alertmanager, Grafana, GitHub, GitLab, Sentry, PagerDuty, Slack, Linear, Standard Webhooks), verified its own way",
        responses: {
          200: { description: "Slack's: taken (Slack takes only a 200), or its url_verification's challenge.", schema: ANSWERS.DeliveryAccepted },
          202: { description: 'Taken: what became of it (started, queued, deduplicated, filtered, resolved).', schema: ANSWERS.DeliveryAccepted },
        },
        problems: [
          'invalid_body',
          'template_error',
          'rate_limited',
          'prompt_too_long',
          'body_too_large',
          'unsupported_media_type',
          'capacity_reached',
          'queue_full',
          'trigger_busy',
          'delivery_in_progress',
          'too_many_attempts',
          'spawn_failed',
        ],
      },
    },
    async ({ request, services, verified: delivery }) => {
      const type = (request.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
      const form = type === 'application/x-www-form-urlencoded' && delivery.trigger.sender.forms === true;
      if (type !== 'application/json' && !form)
        throw new HttpProblem('unsupported_media_type', 'Send the delivery as Content-Type: application/json (GitHub: Content type "application/json").');
      const traceparent = request.headers.get('traceparent') ?? undefined;
      const decision = await services.triggers.deliver(delivery.trigger, delivery.body, request.headers, traceparent, form);
      if (decision.outcome === 'handshake') return json(decision.answer);
      if (decision.outcome === 'refused') {
        const headers: Record<string, string> = decision.code === 'rate_limited' ? { 'retry-after': '60' } : {};
        throw new HttpProblem(decision.code, `Delivery ${decision.delivery} refused: ${decision.reason}.`, {
          headers,
          extra: { delivery: decision.delivery },
        });
      }
      // Slack takes only a 200 (a slash command's answer is shown to its user: `text`, to them alone).
      if (delivery.trigger.definition.sender !== 'slack') return answer({ status: 202, body: decision, headers: {} });
      return answer({
        status: 200,
        body: form ? { ...decision, response_type: 'ephemeral', text: acknowledged(decision, delivery.trigger.reply !== undefined) } : decision,
        headers: {},
      });
    },
  ),
  route(
    {
      name: 'triggers.list',
      method: 'GET',
      path: '/api/triggers',
      auth: 'caller',
      doc: {
        summary: 'List the triggers (never their secrets)',
        responses: { 200: { description: 'The triggers.', schema: ANSWERS.TriggerList } },
        problems: [],
      },
    },
    async ({ services }) => json({ triggers: services.triggers.list() }),
  ),
  route(
    {
      name: 'triggers.deliveries',
      method: 'GET',
      path: '/api/triggers/:name/deliveries',
      auth: 'caller',
      doc: {
        summary: "A trigger's deliveries, newest first: what became of each",
        query: DeliveriesQuery,
        responses: { 200: { description: 'A page.', schema: ANSWERS.DeliveryList } },
        problems: ['invalid_body', 'trigger_not_found'],
      },
    },
    async ({ url, params, services }) => {
      if (!services.triggers.has(params.name)) throw new HttpProblem('trigger_not_found', `No trigger "${params.name}".`);
      const query = parseDeliveriesQuery(url);
      return json(await services.triggers.deliveries(params.name, query.limit, query.cursor));
    },
  ),
];
