import { BUILTIN_AGENTS } from '../core/agents/builtins';

/**
 * What runs inherit of the daemon's environment (docs/configuration.md: `inheritEnv`): all of it
 * (the service's secrets always removed), or only the names listed (`NAME`, or `PREFIX_*`), the
 * basics every program expects, and the credential variables of the built-in agents.
 */
const BASICS = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'LC_*', 'TERM', 'TZ', 'TMPDIR', 'XDG_*'];

export function inheritedEnv(env: NodeJS.ProcessEnv, inherit: 'all' | string[] | undefined): NodeJS.ProcessEnv {
  if (inherit === undefined || inherit === 'all') return { ...env };
  const credentials = BUILTIN_AGENTS.flatMap((adapter) => adapter.credentials?.env ?? []);
  const allowed = [...BASICS, ...credentials, ...inherit];
  const matches = (name: string) => allowed.some((entry) => (entry.endsWith('*') ? name.startsWith(entry.slice(0, -1)) : name === entry));
  return Object.fromEntries(Object.entries(env).filter(([name]) => matches(name)));
}
