import { ANSWERS } from '../../../contract/answers';
import { HttpProblem } from '../../../contract/problems';
import { ApprovalAnswerBody, ApprovalQuery, parseApprovalAnswer, parseApprovalQuery } from '../../../contract/requests';
import { CALLER_NOT_A_RUN } from '../answering';
import { readJsonObject } from '../body';
import { type Route, json, route } from '../router';

/**
 * The questions of runs under `permissions: "ask"` (docs/approvals.md): list, read one, answer.
 * Only a caller, never a run (answering.ts): no agent answers its own questions, nor another run's.
 */
export const APPROVAL_ROUTES: Route[] = [
  route(
    {
      name: 'approvals.list',
      method: 'GET',
      path: '/api/approvals',
      auth: 'caller',
      doc: {
        summary: 'List questions, newest first: a workspace’s, a run’s, or (with neither) every pending one',
        query: ApprovalQuery,
        responses: { 200: { description: 'A page.', schema: ANSWERS.ApprovalList } },
        problems: ['invalid_body', 'workspace_not_found', 'run_not_found'],
      },
    },
    async ({ url, services }) => {
      const filter = parseApprovalQuery(url);
      const run = filter.taskId === undefined ? undefined : await services.runs.get(filter.taskId);
      if (run && filter.workspace !== undefined && run.workspaceId !== filter.workspace) return json({ approvals: [], nextCursor: null });
      const workspaceId = run?.workspaceId ?? (filter.workspace === undefined ? undefined : (await services.workspace(filter.workspace)).id);
      const { limit, cursor, status } = filter;
      const listed = await services.approvals.list({ workspaceId, taskId: filter.taskId, status, limit, ...(cursor ? { cursor } : {}) });
      return json(listed);
    },
  ),
  route(
    {
      name: 'approvals.get',
      method: 'GET',
      path: '/api/approvals/:approvalId',
      auth: 'caller',
      doc: {
        summary: 'Read one question',
        responses: { 200: { description: 'The question, and its answer once it has one.', schema: ANSWERS.Approval } },
        problems: ['approval_not_found'],
      },
    },
    async ({ params, services }) => {
      const approval = await services.approvals.get(params.approvalId);
      if (!approval) throw new HttpProblem('approval_not_found', `No question "${params.approvalId}".`);
      return json(approval);
    },
  ),
  route(
    {
      name: 'approvals.answer',
      method: 'POST',
      path: '/api/approvals/:approvalId',
      auth: CALLER_NOT_A_RUN,
      doc: {
        summary: 'Answer a question: allow or deny, once or for the rest of its run',
        body: ApprovalAnswerBody,
        responses: { 200: { description: 'The question with its answer; the agent is told at once.', schema: ANSWERS.Approval } },
        problems: ['invalid_body', 'approval_not_found', 'approval_answered', 'approval_from_run', 'body_too_large', 'unsupported_media_type'],
      },
    },
    async ({ request, params, services }) => {
      const given = parseApprovalAnswer(await readJsonObject(request));
      const answered = await services.approvals.answer(params.approvalId, given);
      if (!('refused' in answered)) return json(answered);
      if (answered.refused === 'not_found') throw new HttpProblem('approval_not_found', `No question "${params.approvalId}".`);
      const { approval } = answered;
      throw new HttpProblem('approval_answered', `Question "${approval.id}" is already ${approval.status}.`, { extra: { approval } });
    },
  ),
];
