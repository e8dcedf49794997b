import type { ProblemCode } from '../../../contract/problems';
import { ANSWERS } from '../../../contract/answers';
import { readEmptyBody } from '../body';
import { type Route, json, route } from '../router';

const SESSION_PROBLEMS: ProblemCode[] = ['session_not_found'];

/** Sessions: read, retire. */
export const SESSION_ROUTES: Route[] = [
  route(
    {
      name: 'sessions.get',
      method: 'GET',
      path: '/api/sessions/:resumeId',
      auth: 'caller',
      doc: { summary: 'Read a Session', responses: { 200: { description: 'The Session.', schema: ANSWERS.SessionView } }, problems: SESSION_PROBLEMS },
    },
    async ({ params, services }) => json(await services.sessions.view(await services.sessions.require(params.resumeId))),
  ),
  route(
    {
      name: 'sessions.retire',
      method: 'POST',
      path: '/api/sessions/:resumeId/retire',
      auth: 'caller',
      doc: {
        summary: 'Retire a Session',
        responses: { 200: { description: 'The retired Session.', schema: ANSWERS.SessionView } },
        problems: [...SESSION_PROBLEMS, 'session_busy', 'invalid_body', 'unsupported_media_type'],
      },
    },
    async ({ request, params, services }) => {
      await readEmptyBody(request);
      return json(await services.sessions.retire(params.resumeId));
    },
  ),
];
