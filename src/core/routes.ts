import { HttpProblem } from './problem';

/** The HTTP routes of the API, matched on decoded path segments. */

export type RouteName =
  | 'runs.start'
  | 'runs.list'
  | 'runs.get'
  | 'runs.cancel'
  | 'sessions.get'
  | 'sessions.retire'
  | 'inbox.push'
  | 'inbox.list'
  | 'inbox.read';

interface RouteDef {
  name: RouteName;
  method: 'GET' | 'POST';
  path: string[];
}

const ROUTES: RouteDef[] = [
  { name: 'runs.start', method: 'POST', path: ['api', 'workspaces', ':workspaceId', 'headless'] },
  { name: 'runs.list', method: 'GET', path: ['api', 'headless'] },
  { name: 'runs.get', method: 'GET', path: ['api', 'headless', ':taskId'] },
  { name: 'runs.cancel', method: 'POST', path: ['api', 'headless', ':taskId', 'cancel'] },
  { name: 'sessions.get', method: 'GET', path: ['api', 'sessions', ':resumeId'] },
  { name: 'sessions.retire', method: 'POST', path: ['api', 'sessions', ':resumeId', 'retire'] },
  { name: 'inbox.push', method: 'POST', path: ['api', 'workspaces', ':workspaceId', 'inbox'] },
  { name: 'inbox.list', method: 'GET', path: ['api', 'workspaces', ':workspaceId', 'inbox'] },
  { name: 'inbox.read', method: 'POST', path: ['api', 'workspaces', ':workspaceId', 'inbox', ':itemId', 'read'] },
];

export interface RouteMatch {
  name: RouteName;
  params: Record<string, string>;
}

/** A path that matched no route, or a method the route does not take; answered after the gate. */
export interface RouteMiss {
  problem: HttpProblem;
}

function segmentsOf(pathname: string, mountPath: string): string[] | undefined {
  const prefix = mountPath.replace(/\/+$/, '');
  if (prefix && pathname !== prefix && !pathname.startsWith(`${prefix}/`)) return undefined;
  const rest = pathname.slice(prefix.length);
  if (!rest.startsWith('/')) return undefined;
  try {
    return rest.slice(1).split('/').map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

export function matchRoute(method: string, pathname: string, mountPath: string): RouteMatch | RouteMiss {
  const segments = segmentsOf(pathname, mountPath);
  const allowed: string[] = [];
  if (segments) {
    for (const route of ROUTES) {
      if (route.path.length !== segments.length) continue;
      const params: Record<string, string> = {};
      const fits = route.path.every((part, i) => {
        const segment = segments[i]!;
        if (part.startsWith(':')) {
          params[part.slice(1)] = segment;
          return segment !== '';
        }
        return part === segment;
      });
      if (!fits) continue;
      if (route.method === method) return { name: route.name, params };
      allowed.push(route.method);
    }
  }
  if (allowed.length > 0) {
    return {
      problem: new HttpProblem('method_not_allowed', `Use ${allowed.join(' or ')} on this path.`, { headers: { allow: allowed.join(', ') } }),
    };
  }
  return { problem: new HttpProblem('not_found', 'No such route.') };
}
