import { version } from '../../../../package.json';
import { ANSWERS } from '../../../contract/answers';
import { HttpProblem } from '../../../contract/problems';
import { Response } from '@whatwg-node/fetch';
import { type Route, json, route } from '../router';

/**
 * What operators and their tools read: liveness and readiness (open to anyone: they carry only a
 * status), the version and the Prometheus metrics (behind the gate).
 */
export const OPERATIONS_ROUTES: Route[] = [
  route(
    {
      name: 'health.live',
      method: 'GET',
      path: '/healthz',
      auth: 'anyone',
      doc: { summary: 'Alive: the process serves requests', responses: { 200: { description: 'Alive.', schema: ANSWERS.Health } }, problems: [] },
    },
    async () => json({ status: 'ok' }),
  ),
  route(
    {
      name: 'health.ready',
      method: 'GET',
      path: '/readyz',
      auth: 'anyone',
      doc: {
        summary: 'Ready: the store answers and, in a fleet, this instance holds its lease',
        responses: { 200: { description: 'Ready.', schema: ANSWERS.Health } },
        problems: ['not_ready'],
      },
    },
    async ({ services }) => {
      const reason = await services.unready();
      if (reason !== undefined) throw new HttpProblem('not_ready', reason);
      return json({ status: 'ready' });
    },
  ),
  route(
    {
      name: 'version',
      method: 'GET',
      path: '/api/version',
      auth: 'caller',
      doc: { summary: "The service's version", responses: { 200: { description: 'The version.', schema: ANSWERS.Version } }, problems: [] },
    },
    async () => json({ version }),
  ),
  route(
    {
      name: 'metrics',
      method: 'GET',
      path: '/metrics',
      auth: 'caller',
      doc: { summary: 'Prometheus metrics (text format)', responses: { 200: { description: 'The metrics.' } }, problems: [] },
    },
    async ({ services }) => {
      const { contentType, body } = await services.metrics();
      return new Response(body, { status: 200, headers: { 'content-type': contentType } });
    },
  ),
];
