import { version } from '../../../../package.json';
import { openApiDocument, servedAt } from '../openapi';
import { type Route, json, route } from '../router';
import { OPERATIONS_ROUTES } from './operations';
import { INBOX_ROUTES } from './inbox';
import { APPROVAL_ROUTES } from './approvals';
import { RUN_ROUTES } from './runs';
import { SERVICE_ROUTES } from './service';
import { SCHEDULE_ROUTES } from './schedules';
import { SESSION_ROUTES } from './sessions';
import { TRIGGER_ROUTES } from './triggers';
import { USAGE_ROUTES } from './usage';

let openApi: Record<string, unknown> | undefined;

/** Every route of the API, each declaring its method, path, who it lets in and its OpenAPI description. */
export const ROUTES: Route[] = [
  ...RUN_ROUTES,
  ...SESSION_ROUTES,
  ...INBOX_ROUTES,
  ...APPROVAL_ROUTES,
  ...SCHEDULE_ROUTES,
  ...TRIGGER_ROUTES,
  ...USAGE_ROUTES,
  ...SERVICE_ROUTES,
  ...OPERATIONS_ROUTES,
  route(
    {
      name: 'openapi',
      method: 'GET',
      path: '/openapi.json',
      auth: 'caller',
      doc: { summary: 'This document', responses: { 200: { description: 'OpenAPI 3.1.' } }, problems: [] },
    },
    async ({ basePath }) => {
      openApi ??= openApiDocument(ROUTES, version);
      return json(servedAt(openApi, basePath));
    },
  ),
];
