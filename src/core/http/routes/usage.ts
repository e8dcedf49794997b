import { ANSWERS } from '../../../contract/answers';
import { UsageQuery, parseUsageQuery } from '../../../contract/requests';
import { type Route, json, route } from '../router';

/** Spend and tokens per day (docs/http-api.md: Usage), for scripts and the status page's Costs. */
export const USAGE_ROUTES: Route[] = [
  route(
    {
      name: 'usage.days',
      method: 'GET',
      path: '/api/usage',
      auth: 'caller',
      doc: {
        summary:
          'Runs, tokens and spend per UTC day (today first), in total and by workspace, agent, schedule and trigger, with the daily limits in force: one workspace, or every listed one',
        query: UsageQuery,
        responses: { 200: { description: 'The days asked, newest first.', schema: ANSWERS.UsageReport } },
        problems: ['invalid_body', 'workspace_not_found'],
      },
    },
    async ({ url, services }) => {
      const q = parseUsageQuery(url);
      const ids = q.workspaceId === undefined ? services.workspaces().map((w) => w.id) : [q.workspaceId];
      const workspaces = await Promise.all(ids.map((id) => services.workspace(id)));
      const days = await services.runs.usageByDay(ids, q.days);
      const limits = {
        workspaces: Object.fromEntries(workspaces.map((w) => [w.id, w.limits ?? {}])),
        schedules: services.schedules.dailyLimits(ids),
        triggers: services.triggers.dailyLimits(ids),
      };
      return json({ days, limits });
    },
  ),
];
