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
  const sandboxed = [...(config.workspaces ?? []), ...(config.schedules ?? [])].some((c) => c.sandbox);
  if (sandboxed && config.localCallers !== 'token') {
    warnings.push('sandboxed agents still reach this API (headless-inbox needs it), as local callers: set "localCallers": "token" (docs/security.md)');
  }
  return warnings;
}
