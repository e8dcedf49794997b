import { ANSWERS } from '../../../contract/answers';
import { InboxPush, InboxQuery, parseInboxPush, parseInboxQuery } from '../../../contract/requests';
import { readEmptyBody, readJsonObject } from '../body';
import { type Route, json, route } from '../router';

/** The Inbox: push (an agent may, with its run token), list, read one, mark read. */
export const INBOX_ROUTES: Route[] = [
  route(
    {
      name: 'inbox.push',
      method: 'POST',
      path: '/api/workspaces/:workspaceId/inbox',
      auth: 'caller or own run token',
      doc: {
        summary: 'Push an Inbox item (a run token may)',
        body: InboxPush,
        responses: { 201: { description: 'The item.', schema: ANSWERS.InboxItem } },
        problems: ['invalid_body', 'workspace_not_found', 'body_too_large', 'unsupported_media_type'],
      },
    },
    async ({ request, params, services, credential }) => {
      const item = parseInboxPush(await readJsonObject(request));
      const workspace = await services.workspace(params.workspaceId);
      const grant = credential.kind === 'run' ? credential.grant : undefined;
      // An agent's item goes out without its run's secrets.
      const shown = grant ? services.runs.withoutSecrets(grant.taskId, item) : item;
      return json(await services.inbox.push(workspace.id, shown, grant), 201);
    },
  ),
  route(
    {
      name: 'inbox.list',
      method: 'GET',
      path: '/api/workspaces/:workspaceId/inbox',
      auth: 'caller',
      doc: {
        summary: 'List the Inbox, newest first',
        query: InboxQuery,
        responses: { 200: { description: 'A page.', schema: ANSWERS.InboxList } },
        problems: ['invalid_body', 'workspace_not_found'],
      },
    },
    async ({ url, params, services }) => {
      const workspace = await services.workspace(params.workspaceId);
      const query = parseInboxQuery(url);
      return json(await services.inbox.list(workspace.id, query.unread, query.limit, query.cursor));
    },
  ),
  route(
    {
      name: 'inbox.get',
      method: 'GET',
      path: '/api/workspaces/:workspaceId/inbox/:itemId',
      auth: 'caller',
      doc: {
        summary: 'Read one Inbox item (it stays unread)',
        responses: { 200: { description: 'The item.', schema: ANSWERS.InboxItem } },
        problems: ['workspace_not_found', 'inbox_item_not_found'],
      },
    },
    async ({ params, services }) => {
      const workspace = await services.workspace(params.workspaceId);
      return json(await services.inbox.get(workspace.id, params.itemId));
    },
  ),
  route(
    {
      name: 'inbox.read',
      method: 'POST',
      path: '/api/workspaces/:workspaceId/inbox/:itemId/read',
      auth: 'caller',
      doc: {
        summary: 'Mark an Inbox item read',
        responses: { 200: { description: 'The item.', schema: ANSWERS.InboxItem } },
        problems: ['workspace_not_found', 'inbox_item_not_found', 'invalid_body', 'unsupported_media_type'],
      },
    },
    async ({ request, params, services }) => {
      await readEmptyBody(request);
      const workspace = await services.workspace(params.workspaceId);
      return json(await services.inbox.markRead(workspace.id, params.itemId));
    },
  ),
];
