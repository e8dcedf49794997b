import { describe, expect, it } from 'vitest';
import { type RouteVerifier, readCredential, unauthorized, verifierOf } from '../../src/core/http/auth';
import { createPipeline } from '../../src/core/http/pipeline';
import { type RouteServices, json, route } from '../../src/core/http/router';
import { HttpProblem } from '../../src/contract/problems';
import { ROUTES } from '../../src/core/http/routes/index';
import { matchRoute as matchIn } from '../../src/core/http/router';

const matchRoute = (method: string, path: string, basePath: string) => matchIn(ROUTES, method, path, basePath);
import { RunTokens } from '../../src/core/runs/tokens';
import { sha256 } from '../../src/core/util/ids';

const name = (m: ReturnType<typeof matchRoute>) => (m instanceof HttpProblem ? m.code : m.route.name);

describe('the route table', () => {
  it('matches every route on decoded segments, with its params', () => {
    const m = matchRoute('POST', '/api/workspaces/my%20ws/inbox/inb_1/read', '');
    expect(m).not.toBeInstanceOf(HttpProblem);
    if (m instanceof HttpProblem) return;
    expect(m.route.name).toBe('inbox.read');
    expect(m.params).toEqual({ workspaceId: 'my ws', itemId: 'inb_1' });
    expect(name(matchRoute('GET', '/api/headless', ''))).toBe('runs.list');
    expect(name(matchRoute('GET', '/api/headless/run_1', ''))).toBe('runs.get');
    expect(name(matchRoute('POST', '/api/headless/run_1/cancel', ''))).toBe('runs.cancel');
  });

  it('matches below the mount path only', () => {
    expect(name(matchRoute('GET', '/agents/api/headless/run_1', '/agents'))).toBe('runs.get');
    expect(name(matchRoute('GET', '/api/headless/run_1', '/agents'))).toBe('not_found');
    expect(name(matchRoute('GET', '/agentsx/api/headless/run_1', '/agents'))).toBe('not_found');
  });

  it('a known path with another method is 405 naming the methods; no route is 404; a bad escape is 404', () => {
    const m = matchRoute('DELETE', '/api/workspaces/ws/inbox', '');
    expect(m).toBeInstanceOf(HttpProblem);
    expect((m as HttpProblem).code).toBe('method_not_allowed');
    expect((m as HttpProblem).headers.allow).toBe('POST, GET, HEAD');
    expect(name(matchRoute('GET', '/api/nothing', ''))).toBe('not_found');
    expect(name(matchRoute('GET', '/api/headless/%E0%A4%A', ''))).toBe('not_found');
    expect(name(matchRoute('GET', '/api/headless/', ''))).toBe('not_found');
  });

  it('every route has a distinct method and path', () => {
    const keys = ROUTES.map((r) => `${r.method} ${r.segments.join('/')}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});

describe('who each route lets in', () => {
  it('is declared on the route: run tokens only where an agent may report, no gate only for the probes', () => {
    const declared = Object.fromEntries(ROUTES.map((r) => [r.name, r.auth]));
    expect(declared).toMatchObject({ 'inbox.push': 'caller or own run token', mcp: 'caller or run token', 'runs.start': 'caller', 'inbox.list': 'caller' });
    const names = (auth: string) =>
      ROUTES.filter((r) => r.auth === auth)
        .map((r) => r.name)
        .sort();
    expect([...names('caller or own run token'), ...names('caller or run token')].sort()).toEqual(['inbox.push', 'mcp']);
    expect(names('anyone')).toEqual(['health.live', 'health.ready']);
  });
});

describe('the request credential', () => {
  const tokens = new RunTokens();
  const token = tokens.issue({ taskId: 'run_1', workspaceId: 'ws', resumeId: 'ses_1' });
  const req = (authorization?: string) => new Request('http://localhost/', { headers: authorization ? { authorization } : {} });

  it('is read once from the header', () => {
    expect(readCredential(req(), tokens, verifierOf('caller'), undefined)).toEqual({ kind: 'none' });
    expect(readCredential(req('Basic abc'), tokens, verifierOf('caller'), undefined)).toEqual({ kind: 'malformed' });
    expect(readCredential(req('Bearer  admin-tok '), tokens, verifierOf('caller'), undefined)).toEqual({
      kind: 'bearer',
      token: 'admin-tok',
      digest: sha256('admin-tok'),
    });
  });

  it('a run token is in scope only for its own workspace Inbox push, and only while live', () => {
    const grant = { taskId: 'run_1', workspaceId: 'ws', resumeId: 'ses_1' };
    expect(readCredential(req(`Bearer ${token}`), tokens, verifierOf('caller or own run token'), 'ws')).toEqual({ kind: 'run', grant, inScope: true });
    expect(readCredential(req(`Bearer ${token}`), tokens, verifierOf('caller or own run token'), 'other')).toEqual({ kind: 'run', grant, inScope: false });
    expect(readCredential(req(`Bearer ${token}`), tokens, verifierOf('caller'), 'ws')).toEqual({ kind: 'run', grant, inScope: false });
    tokens.revoke('run_1');
    expect(readCredential(req(`Bearer ${token}`), tokens, verifierOf('caller or own run token'), 'ws')).toEqual({
      kind: 'bearer',
      token,
      digest: sha256(token),
    });
  });
});

describe("a route's own verifier (the seam a signed-webhook route plugs into)", () => {
  const signed: RouteVerifier<{ sender: string }> = {
    name: 'signature',
    runTokens: 'none',
    security: [{}],
    async verify(request) {
      if (request.headers.get('x-signature') !== 'good') throw unauthorized();
      return { sender: request.headers.get('x-sender') ?? '' };
    },
  };
  const doc = { summary: 'x', responses: {}, problems: [] };
  const gateAsked: string[] = [];
  const pipeline = createPipeline({
    routes: [
      route({ name: 'hooks.receive', method: 'POST', path: '/hooks/:name', auth: signed, doc }, async ({ params, verified }) =>
        json({ received: params.name, from: verified.sender }),
      ),
      route({ name: 'runs.secret', method: 'GET', path: '/secret', auth: 'caller', doc }, async () => json({ secret: true })),
    ],
    services: {} as RouteServices,
    tokens: new RunTokens(),
    gate: (_request, context) => {
      gateAsked.push(context.route);
      return false;
    },
    customGate: true,
    apiUrl: () => undefined,
    ready: Promise.resolve(),
    log: () => undefined,
    close: async () => undefined,
  });
  const remote = { remoteAddress: '203.0.113.9' };
  const post = (headers: Record<string, string>) => pipeline.fetch('http://service.test/hooks/alerts', { method: 'POST', headers }, remote);

  it('alone decides who gets in: the gate is never asked, a remote sender with no admin token is let in by its signature', async () => {
    const ok = await post({ 'x-signature': 'good' });
    expect(ok.status).toBe(200);
    // What it verified is handed to the route's handler.
    expect(await ok.json()).toEqual({ received: 'alerts', from: '' });
    expect(await (await post({ 'x-signature': 'good', 'x-sender': 'alertmanager' })).json()).toEqual({ received: 'alerts', from: 'alertmanager' });
    expect((await post({ 'x-signature': 'bad' })).status).toBe(401);
    expect(gateAsked).toEqual([]);
  });

  it('opens nothing else: the same sender on a caller route meets the gate', async () => {
    expect((await pipeline.fetch('http://service.test/secret', { headers: { 'x-signature': 'good' } }, remote)).status).toBe(401);
    expect(gateAsked).toEqual(['runs.secret']);
  });
});
