import type { AdminToken } from './admin-token';
import type { DaemonConfig } from './config';

/** What an operator should know at start: a token others can read, a proxy that may make the internet local. */
export function startWarnings(admin: AdminToken, config: DaemonConfig, loopbackBind: boolean): string[] {
  const warnings = admin.warning ? [admin.warning] : [];
  if (loopbackBind && (config.publicHosts ?? []).length > 0 && config.localCallers !== 'token') {
    warnings.push(
      'publicHosts is set, so a proxy on this host forwards to this loopback address: one that adds no X-Forwarded-For makes every request local. Set "localCallers": "token" (docs/deployment.md)',
    );
  }
  // Through its egress proxy a sandboxed agent is no local caller; with the host's network it is one.
  const open = (config.workspaces ?? []).filter((ws) => (ws.network ?? []).includes('*'));
  const sandboxedOpen = open.filter(
    (ws) => ws.run?.sandbox || [...(config.schedules ?? []), ...(config.triggers ?? [])].some((s) => s.run?.sandbox && s.workspace === ws.id),
  );
  if (sandboxedOpen.length > 0 && config.localCallers !== 'token') {
    warnings.push(
      `sandboxed agents of workspace "${sandboxedOpen[0]?.id}" have the host's network (network ["*"]), so they reach this API as local callers: set "localCallers": "token" (docs/security.md)`,
    );
  }
  return warnings;
}
