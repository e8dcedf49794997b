import type { RunPolicy } from '../../contract/records';

const PERMISSIONS: ReadonlyArray<RunPolicy['permissions']> = ['full', 'read-only'];

/** Where a run's policy can be set: a workspace, and a schedule over it. */
export interface PolicySettings {
  permissions?: RunPolicy['permissions'];
  sandbox?: boolean;
}

/** Throws, naming where, on a policy setting that cannot work. */
export function checkPolicy(settings: PolicySettings, where: string): void {
  if (settings.permissions !== undefined && !PERMISSIONS.includes(settings.permissions)) {
    throw new Error(`${where}: permissions must be "full" or "read-only"`);
  }
  if (settings.sandbox !== undefined && typeof settings.sandbox !== 'boolean') throw new Error(`${where}: sandbox must be true or false`);
}

/** The policy a run is accepted with: the schedule's settings over the workspace's; undefined when it is unconfined. */
export function runPolicy(workspace: PolicySettings, schedule: PolicySettings = {}): RunPolicy | undefined {
  const permissions = schedule.permissions ?? workspace.permissions ?? 'full';
  const sandbox = schedule.sandbox ?? workspace.sandbox ?? false;
  return permissions === 'full' && !sandbox ? undefined : { permissions, sandbox };
}
