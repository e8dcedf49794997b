import { ANSWERS } from '../../../contract/answers';
import { readEmptyBody } from '../body';
import { type Route, answer, json, route } from '../router';

/** Schedules (docs/queue-and-schedules.md): list them, run one now. */
export const SCHEDULE_ROUTES: Route[] = [
  route(
    {
      name: 'schedules.list',
      method: 'GET',
      path: '/api/schedules',
      auth: 'caller',
      doc: {
        summary: 'List the schedules, with their next occurrence and last run',
        responses: { 200: { description: 'The schedules.', schema: ANSWERS.ScheduleList } },
        problems: [],
      },
    },
    async ({ services }) => json({ schedules: await services.schedules.list() }),
  ),
  route(
    {
      name: 'schedules.run',
      method: 'POST',
      path: '/api/schedules/:name/run',
      auth: 'caller',
      doc: {
        summary: 'Start a run of a schedule now',
        responses: { 202: { description: 'Started (or queued).', schema: ANSWERS.StartAccepted } },
        problems: ['schedule_not_found', 'invalid_body', 'unsupported_media_type', 'capacity_reached', 'queue_full', 'spawn_failed', 'shutting_down'],
      },
    },
    async ({ request, params, services, basePath }) => {
      await readEmptyBody(request);
      const fired = await services.schedules.runNow(params.name);
      const record = await services.runs.get('started' in fired ? fired.started : '');
      const body = {
        taskId: record.taskId,
        resumeId: record.resumeId,
        status: record.status,
        ...(record.queuePosition === undefined ? {} : { queuePosition: record.queuePosition }),
      };
      return answer({ status: 202, body, headers: { location: `${basePath}/api/headless/${encodeURIComponent(record.taskId)}` } });
    },
  ),
];
