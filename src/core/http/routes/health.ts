import { version } from '../../../../package.json';
import { ANSWERS } from '../../../contract/answers';
import { HttpProblem } from '../../../contract/problems';
import { type Route, json, route } from '../router';

/** What a supervisor, a container runtime or a load balancer probes: open to anyone, they carry only a status. */
export const HEALTH_ROUTES: Route[] = [
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
];
