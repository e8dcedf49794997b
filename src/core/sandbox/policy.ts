import type { RunPolicy } from '../../contract/records';
import { GIT_REF, PLACEMENT_NAME } from '../../contract/requests';
import { type ApprovalSettings, approvalPolicy, checkApprovalSettings } from '../approvals/approval-policy';

const PERMISSIONS: ReadonlyArray<RunPolicy['permissions']> = ['full', 'read-only', 'ask'];

/** Where a run's policy can be set: a workspace, a schedule or trigger over it, a start over both. */
export interface PolicySettings {
  permissions?: RunPolicy['permissions'];
  /** Under `permissions: "ask"`: its questions' timeout and fallback, and rules that answer without asking (docs/approvals.md). */
  approvals?: ApprovalSettings;
  sandbox?: boolean;
  /** The placement provider that places the run: `worktree`, a git worktree of its own (docs/worktrees.md), or a registered one. @default "none" */
  isolation?: string;
  /** The ref its worktree is made from. @default "HEAD" */
  ref?: string;
}

/** An entry of a workspace's `network`: `host:port` (IPv6 in brackets), or `*`. */
export const NETWORK_TARGET = /^(\*|[A-Za-z0-9.-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5})$/;

/** Throws, naming where, on a policy setting that cannot work. */
export function checkPolicy(settings: PolicySettings & { network?: string[] }, where: string): void {
  for (const target of settings.network ?? []) if (!NETWORK_TARGET.test(target)) throw new Error(`${where}: network entry "${target}" must be host:port, or *`);
  if (settings.permissions !== undefined && !PERMISSIONS.includes(settings.permissions)) {
    throw new Error(`${where}: permissions must be "full", "read-only" or "ask"`);
  }
  checkApprovalSettings(settings.approvals, `${where}: approvals`);
  if (settings.sandbox !== undefined && typeof settings.sandbox !== 'boolean') throw new Error(`${where}: sandbox must be true or false`);
  // Whether a provider of that name is registered is checked where they are known (resources.ts).
  if (settings.isolation !== undefined && !(typeof settings.isolation === 'string' && PLACEMENT_NAME.test(settings.isolation)))
    throw new Error(`${where}: isolation must name a placement provider ("none", "worktree" or a registered one)`);
  if (settings.ref !== undefined && !(typeof settings.ref === 'string' && GIT_REF.test(settings.ref)))
    throw new Error(`${where}: ref must be a git ref (${GIT_REF.source})`);
}

/**
 * The policy a run is accepted with: the start's settings over its schedule's or trigger's, over
 * the workspace's (whose `worktree.ref` is its default ref); undefined when it is unconfined and
 * in its workspace's own folder.
 */
export function runPolicy(
  workspace: PolicySettings & { worktree?: { ref?: string } },
  origin: PolicySettings = {},
  start: Pick<PolicySettings, 'isolation' | 'ref'> = {},
): RunPolicy | undefined {
  const permissions = origin.permissions ?? workspace.permissions ?? 'full';
  const sandbox = origin.sandbox ?? workspace.sandbox ?? false;
  const isolation = start.isolation ?? origin.isolation ?? workspace.isolation ?? 'none';
  const ref = start.ref ?? origin.ref ?? workspace.worktree?.ref ?? 'HEAD';
  if (permissions === 'full' && !sandbox && isolation === 'none') return undefined;
  return {
    permissions,
    ...(permissions === 'ask' ? { approvals: approvalPolicy(workspace.approvals, origin.approvals) } : {}),
    sandbox,
    // A worktree run's policy is what it was before providers had names: its `worktree` names it.
    ...(isolation === 'worktree' ? { worktree: { ref } } : isolation === 'none' ? {} : { isolation }),
  };
}
