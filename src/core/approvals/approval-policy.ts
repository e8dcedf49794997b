/**
 * @module How a run under `permissions: "ask"` is answered (docs/approvals.md): its policy (a
 * question's timeout, the fallback it then gets, rules that answer without asking) as set on its
 * workspace, schedule or trigger, and the answer the policy gives a question by itself.
 */
import { isAbsolute, relative, resolve } from 'node:path';
import type { ApprovalPolicy, ApprovalRule, RunPolicy } from '../../contract/records';
import type { RunSpec } from '../../contract/run-spec';
import type { PermissionQuestion } from '../agents/types';

/** Where an approval policy is set: a run spec's `approvals` (a workspace's, a schedule's or trigger's, a start's), each over the one below. */
export type ApprovalSettings = NonNullable<RunSpec['approvals']>;

export const DEFAULT_APPROVAL_TIMEOUT_MS = 15 * 60_000;

/** The run's approval policy: the origin's settings over the workspace's, field by field. */
export function approvalPolicy(workspace: ApprovalSettings = {}, origin: ApprovalSettings = {}): ApprovalPolicy {
  const rules = origin.rules ?? workspace.rules;
  return {
    timeoutMs: origin.timeoutMs ?? workspace.timeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS,
    fallback: origin.fallback ?? workspace.fallback ?? 'deny',
    ...(rules && rules.length > 0 ? { rules } : {}),
  };
}

/**
 * The policy's own answer: `full` allows and `read-only` denies everything; under `ask` the
 * first rule that matches answers, and `ask` means a caller must. A question the approver would
 * not see whole (`truncated`: its shown text was cut) is never allowed by a rule.
 */
export function answerByPolicy(policy: RunPolicy | undefined, question: PermissionQuestion, cwd: string, truncated = false): 'allow' | 'deny' | 'ask' {
  const permissions = policy?.permissions ?? 'full';
  if (permissions === 'full') return 'allow';
  if (permissions === 'read-only') return 'deny';
  const rules = (policy?.approvals?.rules ?? []).filter((r) => !(truncated && r.answer === 'allow'));
  const rule = rules.find((r) => matches(r, question, cwd));
  return rule?.answer ?? 'ask';
}

function matches(rule: ApprovalRule, question: PermissionQuestion, cwd: string): boolean {
  if (rule.kinds && !(question.kind !== undefined && rule.kinds.includes(question.kind))) return false;
  if (!rule.paths) return true;
  if (question.paths.length === 0) return false;
  return question.paths.every((path) => rule.paths?.some((folder) => inside(resolve(cwd, folder), resolve(cwd, path))));
}

/** `path` is `folder` or below it. */
function inside(folder: string, path: string): boolean {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}
