import { sha256 } from '../util/ids';
import { LINEAR } from './linear';
import type { DeliveryFacts, Sender } from './sender';
import { SLACK } from './slack';

export type { DeliveryFacts, Sender } from './sender';

export const SENDER_NAMES = ['alertmanager', 'grafana', 'github', 'gitlab', 'sentry', 'pagerduty', 'slack', 'linear', 'standard-webhooks', 'generic'] as const;
export type SenderName = (typeof SENDER_NAMES)[number];

type Json = Record<string, unknown>;
const obj = (value: unknown): Json => (value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {});
const str = (value: unknown): string | undefined => (typeof value === 'string' || typeof value === 'number' ? String(value) : undefined);
const joined = (...parts: Array<string | undefined>) => (parts.every((p) => p !== undefined) ? parts.join('.') : parts.find((p) => p !== undefined));

/**
 * An alert group (Alertmanager, Grafana): the same group repeats while it fires (every
 * `repeat_interval`); it is a new delivery only when its status or its alerts (each by
 * fingerprint and start) change.
 */
function alertGroup(payload: Json): DeliveryFacts {
  const status = payload.status === 'resolved' ? 'resolved' : 'firing';
  const groupKey = str(payload.groupKey);
  const alerts = Array.isArray(payload.alerts) ? payload.alerts.map(obj) : [];
  const members = alerts.map((a) => `${str(a.fingerprint) ?? ''}@${str(a.startsAt) ?? ''}`).sort();
  return {
    event: 'alert',
    status,
    ...(groupKey === undefined ? {} : { incident: groupKey, dedupeKey: sha256(`${status}\0${groupKey}\0${members.join(',')}`) }),
  };
}

const ALERT_EXAMPLE: Json = {
  version: '4',
  groupKey: '{}:{alertname="HighLatency"}',
  truncatedAlerts: 0,
  status: 'firing',
  receiver: 'headless',
  groupLabels: { alertname: 'HighLatency' },
  commonLabels: { alertname: 'HighLatency', severity: 'page', service: 'api' },
  commonAnnotations: { summary: 'p99 latency above 1s', description: 'api p99 is 1.4s', runbook_url: 'https://runbooks.example/latency' },
  externalURL: 'http://alertmanager.example:9093',
  alerts: [
    {
      status: 'firing',
      labels: { alertname: 'HighLatency', severity: 'page', service: 'api', instance: 'api-1:9100' },
      annotations: { summary: 'p99 latency above 1s', description: 'api p99 is 1.4s' },
      startsAt: '2026-11-25T10:00:00Z',
      endsAt: '0001-01-01T00:00:00Z',
      generatorURL: 'http://prometheus.example:9090/graph',
      fingerprint: 'c8a6f1ce0a9e1b2d',
    },
  ],
};

const SENDERS: Record<SenderName, Sender> = {
  alertmanager: { verify: { method: 'bearer' }, example: ALERT_EXAMPLE, read: alertGroup },
  grafana: {
    verify: { method: 'grafana' },
    example: { ...ALERT_EXAMPLE, orgId: 1, title: '[FIRING:1] HighLatency', state: 'alerting', message: 'p99 latency above 1s' },
    read: alertGroup,
  },
  github: {
    unsignedId: true,
    verify: { method: 'github' },
    example: {
      action: 'opened',
      issue: {
        number: 42,
        title: 'Login fails',
        body: 'Steps…',
        html_url: 'https://github.com/o/r/issues/42',
        labels: [{ name: 'bug' }],
        user: { login: 'octocat' },
      },
      repository: { full_name: 'o/r', html_url: 'https://github.com/o/r' },
      sender: { login: 'octocat' },
    },
    read: (payload, headers) => {
      const number = str(obj(payload.issue).number ?? obj(payload.pull_request).number);
      const repository = str(obj(payload.repository).full_name);
      return {
        event: joined(headers.get('x-github-event') ?? undefined, str(payload.action)),
        deliveryId: headers.get('x-github-delivery') ?? undefined,
        dedupeKey: headers.get('x-github-delivery') ?? undefined,
        ...(number && repository ? { incident: `${repository}#${number}` } : {}),
      };
    },
  },
  gitlab: {
    unsignedId: true,
    verify: { method: 'gitlab-token' },
    example: {
      object_kind: 'issue',
      event_type: 'issue',
      user: { username: 'root' },
      project: { path_with_namespace: 'group/project', web_url: 'https://gitlab.example/group/project' },
      object_attributes: {
        iid: 7,
        title: 'Login fails',
        description: 'Steps…',
        action: 'open',
        state: 'opened',
        url: 'https://gitlab.example/group/project/-/issues/7',
      },
      labels: [{ title: 'bug' }],
    },
    read: (payload, headers) => {
      const id = headers.get('idempotency-key') ?? headers.get('webhook-id') ?? headers.get('x-gitlab-event-uuid') ?? undefined;
      const attributes = obj(payload.object_attributes);
      const project = str(obj(payload.project).path_with_namespace);
      const iid = str(attributes.iid);
      return {
        event: joined(str(payload.object_kind), str(attributes.action)),
        deliveryId: id,
        dedupeKey: id,
        ...(project && iid ? { incident: `${project}#${iid}` } : {}),
      };
    },
  },
  sentry: {
    unsignedId: true,
    verify: { method: 'sentry' },
    example: {
      action: 'created',
      installation: { uuid: 'a8e5d37a-696c-4c54-adb5-b3f28d64c7de' },
      data: {
        issue: {
          id: '1170820242',
          shortId: 'API-3',
          title: 'TypeError: x is undefined',
          culprit: 'handler',
          level: 'error',
          web_url: 'https://sentry.example/issues/1170820242/',
          project: { slug: 'api' },
        },
      },
      actor: { type: 'application', name: 'Sentry' },
    },
    read: (payload, headers) => {
      const action = str(payload.action);
      const data = obj(payload.data);
      const issue = str(obj(data.issue).id ?? obj(data.event).issue_id);
      const id = headers.get('request-id') ?? undefined;
      return {
        event: joined(headers.get('sentry-hook-resource') ?? undefined, action),
        ...(action === 'resolved'
          ? { status: 'resolved' as const }
          : action === 'created' || action === 'triggered' || action === 'critical'
            ? { status: 'firing' as const }
            : {}),
        deliveryId: id,
        dedupeKey: id,
        ...(issue ? { incident: issue } : {}),
      };
    },
  },
  pagerduty: {
    unsignedId: true,
    verify: { method: 'pagerduty' },
    example: {
      event: {
        id: '01DEN4HPBQAA6ZHPZRQ3TZ9KNK',
        event_type: 'incident.triggered',
        resource_type: 'incident',
        occurred_at: '2026-11-25T10:00:00.000Z',
        data: {
          id: 'PGR0VU2',
          type: 'incident',
          number: 2,
          title: 'A little bump in the road',
          status: 'triggered',
          urgency: 'high',
          html_url: 'https://acme.pagerduty.com/incidents/PGR0VU2',
          service: { id: 'PF9KMXH', summary: 'API Service' },
          priority: null,
        },
      },
    },
    read: (payload, headers) => {
      const event = obj(payload.event);
      const type = str(event.event_type);
      const id = headers.get('x-webhook-id') ?? undefined;
      return {
        event: type,
        ...(type === 'incident.resolved'
          ? { status: 'resolved' as const }
          : type === 'incident.triggered' || type === 'incident.reopened'
            ? { status: 'firing' as const }
            : {}),
        deliveryId: id,
        dedupeKey: id,
        ...(str(obj(event.data).id) ? { incident: str(obj(event.data).id) } : {}),
      };
    },
  },
  slack: SLACK,
  linear: LINEAR,
  'standard-webhooks': {
    verify: { method: 'standard-webhooks' },
    read: (payload, headers) => {
      const id = headers.get('webhook-id') ?? undefined;
      return { event: str(payload.type), deliveryId: id, dedupeKey: id };
    },
  },
  generic: { read: () => ({}) },
};

export const senderOf = (name: SenderName): Sender => SENDERS[name];
