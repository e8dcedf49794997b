import type { RunPolicy } from '../../contract/records';

const PERMISSIONS: ReadonlyArray<RunPolicy['permissions']> = ['full', 'read-only'];

/** Where a run's policy can be set: a workspace, and a schedule over it. */
export interface PolicySettings {
  permissions?: RunPolicy['permissions'];
  sandbox?: boolean;
}

/** An entry of a workspace's `network`: `host:port` (IPv6 in brackets), or `*`. */
export const NETWORK_TARGET = /^(\*|[A-Za-z0-9.-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5})$/;

/** Throws, naming where, on a policy setting that cannot work. */
export function checkPolicy(settings: PolicySettings & { network?: string[] }, where: string): void {
  for (const target of settings.network ?? []) if (!NETWORK_TARGET.test(target)) throw new Error(`${where}: network entry "${target}" must be host:port, or *`);
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
