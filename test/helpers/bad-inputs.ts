import type { RequestOptions } from './harness';

/**
 * Reliability-security §4.1 and §4.2 as data: each bad input with its contract status and code.
 * Run in-process (test/bad-input.test.ts) and against the real daemon (test/reliability.test.ts).
 * Rows with `remote` need a non-loopback peer, which only the in-process run can fake.
 */

export const ADMIN_TOKEN = 'admin-secret-token-value-0123456789';
export const START = '/api/workspaces/ws/headless';
const json = (body: unknown): RequestOptions => ({ json: body });
const big = 'p'.repeat(16_001);

export interface Row {
  name: string;
  method?: string;
  path?: string;
  options: RequestOptions;
  status: number;
  code: string;
}

export const rows: Row[] = [
  // Body shape
  { name: 'invalid JSON', options: { body: '{"prompt":', headers: { 'content-type': 'application/json' } }, status: 400, code: 'invalid_body' },
  { name: 'empty body', options: { body: '', headers: { 'content-type': 'application/json' } }, status: 400, code: 'invalid_body' },
  { name: 'JSON array', options: json([{ prompt: 'x' }]), status: 400, code: 'invalid_body' },
  { name: 'JSON null', options: json(null), status: 400, code: 'invalid_body' },
  { name: 'JSON string', options: json('prompt'), status: 400, code: 'invalid_body' },
  { name: 'JSON number', options: json(42), status: 400, code: 'invalid_body' },
  { name: 'unknown field env', options: json({ prompt: 'x', env: { A: '1' } }), status: 400, code: 'invalid_body' },
  { name: 'unknown field cwd', options: json({ prompt: 'x', cwd: '/' }), status: 400, code: 'invalid_body' },
  { name: 'unknown field args', options: json({ prompt: 'x', args: ['--yolo'] }), status: 400, code: 'invalid_body' },
  { name: 'unknown field command', options: json({ prompt: 'x', command: 'sh' }), status: 400, code: 'invalid_body' },
  { name: 'unknown field shell', options: json({ prompt: 'x', shell: true }), status: 400, code: 'invalid_body' },
  {
    name: '__proto__ pollution',
    options: { body: '{"prompt":"x","__proto__":{"polluted":1}}', headers: { 'content-type': 'application/json' } },
    status: 400,
    code: 'invalid_body',
  },
  { name: 'constructor.prototype pollution', options: json({ prompt: 'x', constructor: { prototype: { polluted: 1 } } }), status: 400, code: 'invalid_body' },
  // Prompt
  { name: 'missing prompt', options: json({}), status: 400, code: 'prompt_required' },
  { name: 'empty prompt', options: json({ prompt: '' }), status: 400, code: 'prompt_required' },
  { name: 'whitespace prompt', options: json({ prompt: ' \n\t ' }), status: 400, code: 'prompt_required' },
  { name: 'prompt number', options: json({ prompt: 5 }), status: 400, code: 'invalid_body' },
  { name: 'prompt array', options: json({ prompt: ['x'] }), status: 400, code: 'invalid_body' },
  { name: 'prompt null', options: json({ prompt: null }), status: 400, code: 'invalid_body' },
  { name: 'prompt 16001 chars', options: json({ prompt: big }), status: 400, code: 'prompt_too_long' },
  { name: 'prompt of 16001 astral chars (String.length)', options: json({ prompt: '😀'.repeat(8001) }), status: 400, code: 'prompt_too_long' },
  // timeoutMs
  { name: 'timeout -1', options: json({ prompt: 'x', timeoutMs: -1 }), status: 400, code: 'invalid_timeout' },
  { name: 'timeout 0', options: json({ prompt: 'x', timeoutMs: 0 }), status: 400, code: 'invalid_timeout' },
  { name: 'timeout "10"', options: json({ prompt: 'x', timeoutMs: '10' }), status: 400, code: 'invalid_timeout' },
  { name: 'timeout 1.5', options: json({ prompt: 'x', timeoutMs: 1.5 }), status: 400, code: 'invalid_timeout' },
  {
    name: 'timeout 1e309',
    options: { body: '{"prompt":"x","timeoutMs":1e309}', headers: { 'content-type': 'application/json' } },
    status: 400,
    code: 'invalid_timeout',
  },
  { name: 'timeout null', options: json({ prompt: 'x', timeoutMs: null }), status: 400, code: 'invalid_timeout' },
  { name: 'timeout true', options: json({ prompt: 'x', timeoutMs: true }), status: 400, code: 'invalid_timeout' },
  // wait
  { name: 'wait "true"', options: json({ prompt: 'x', wait: 'true' }), status: 400, code: 'invalid_body' },
  { name: 'wait 1', options: json({ prompt: 'x', wait: 1 }), status: 400, code: 'invalid_body' },
  { name: 'wait null', options: json({ prompt: 'x', wait: null }), status: 400, code: 'invalid_body' },
  // resumeId
  { name: 'resumeId --help', options: json({ prompt: 'x', resumeId: '--help' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId -x', options: json({ prompt: 'x', resumeId: '-x' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId ../x', options: json({ prompt: 'x', resumeId: '../x' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId a/b', options: json({ prompt: 'x', resumeId: 'a/b' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId with space', options: json({ prompt: 'x', resumeId: 'a b' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId with NUL', options: json({ prompt: 'x', resumeId: 'a\u0000b' }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId 300 chars', options: json({ prompt: 'x', resumeId: 'a'.repeat(300) }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId number', options: json({ prompt: 'x', resumeId: 7 }), status: 400, code: 'invalid_resume_id' },
  { name: 'resumeId with wait', options: json({ prompt: 'x', resumeId: 'ses_x', wait: true }), status: 400, code: 'resume_requires_async' },
  { name: 'unknown resumeId', options: json({ prompt: 'x', resumeId: 'ses_unknown' }), status: 404, code: 'session_not_found' },
  // agent
  { name: 'agent unknown', options: json({ prompt: 'x', agent: 'nope' }), status: 400, code: 'agent_unknown' },
  { name: 'agent bash', options: json({ prompt: 'x', agent: 'bash' }), status: 400, code: 'agent_unknown' },
  { name: 'agent path', options: json({ prompt: 'x', agent: '../../bin/sh' }), status: 400, code: 'agent_unknown' },
  { name: 'agent with flags', options: json({ prompt: 'x', agent: 'claude --dangerously-skip-permissions' }), status: 400, code: 'agent_unknown' },
  { name: 'agent __proto__', options: json({ prompt: 'x', agent: '__proto__' }), status: 400, code: 'agent_unknown' },
  { name: 'agent constructor', options: json({ prompt: 'x', agent: 'constructor' }), status: 400, code: 'agent_unknown' },
  { name: 'agent shell', options: json({ prompt: 'x', agent: 'shell' }), status: 400, code: 'agent_not_headless' },
  { name: 'agent utility', options: json({ prompt: 'x', agent: 'util' }), status: 400, code: 'agent_not_headless' },
  { name: 'agent disabled', options: json({ prompt: 'x', agent: 'codex' }), status: 400, code: 'agent_disabled' },
  { name: 'agent number', options: json({ prompt: 'x', agent: 1 }), status: 400, code: 'invalid_body' },
  // Media type
  { name: 'text/plain', options: { body: '{"prompt":"x"}', headers: { 'content-type': 'text/plain' } }, status: 415, code: 'unsupported_media_type' },
  {
    name: 'text/plain; application/json',
    options: { body: '{"prompt":"x"}', headers: { 'content-type': 'text/plain; application/json' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'form urlencoded',
    options: { body: 'prompt=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'multipart',
    options: { body: '--b\r\n', headers: { 'content-type': 'multipart/form-data; boundary=b' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  { name: 'no content type', options: { body: '{"prompt":"x"}' }, status: 415, code: 'unsupported_media_type' },
  {
    name: 'application/json+junk param',
    options: { body: '{"prompt":"x"}', headers: { 'content-type': 'application/json; foo=bar' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  // Size
  {
    name: 'body over 256 KiB',
    options: { body: JSON.stringify({ prompt: 'x'.repeat(300_000) }), headers: { 'content-type': 'application/json' } },
    status: 413,
    code: 'body_too_large',
  },
  {
    name: 'declared length over 256 KiB',
    options: { body: JSON.stringify({ prompt: 'x'.repeat(300_000) }), headers: { 'content-type': 'application/json', 'content-length': '300020' } },
    status: 413,
    code: 'body_too_large',
  },
  // Workspace ids
  { name: 'unknown workspace', path: '/api/workspaces/nope/headless', options: json({ prompt: 'x' }), status: 404, code: 'workspace_not_found' },
  { name: 'workspace ..%2F..%2Fetc', path: '/api/workspaces/..%2F..%2Fetc/headless', options: json({ prompt: 'x' }), status: 404, code: 'workspace_not_found' },
  // The URL parser resolves %2e%2e as a dot segment: the path becomes /api/headless, never a workspace.
  { name: 'workspace %2e%2e', path: '/api/workspaces/%2e%2e/headless', options: json({ prompt: 'x' }), status: 405, code: 'method_not_allowed' },
  { name: 'workspace with NUL', path: '/api/workspaces/ws%00/headless', options: json({ prompt: 'x' }), status: 404, code: 'workspace_not_found' },
  { name: 'workspace leading dash', path: '/api/workspaces/-ws/headless', options: json({ prompt: 'x' }), status: 404, code: 'workspace_not_found' },
  {
    name: 'workspace 10 KB id',
    path: `/api/workspaces/${'w'.repeat(10_000)}/headless`,
    options: json({ prompt: 'x' }),
    status: 404,
    code: 'workspace_not_found',
  },
  { name: 'workspace unicode look-alike', path: '/api/workspaces/w%D1%95/headless', options: json({ prompt: 'x' }), status: 404, code: 'workspace_not_found' },
  { name: 'workspace bad escape', path: '/api/workspaces/%E0%A4%A/headless', options: json({ prompt: 'x' }), status: 404, code: 'not_found' },
  { name: 'workspace a/b', path: '/api/workspaces/a/b/headless', options: json({ prompt: 'x' }), status: 404, code: 'not_found' },
  // Other routes
  { name: 'GET malformed task id', method: 'GET', path: '/api/headless/..%2Fetc', options: {}, status: 404, code: 'run_not_found' },
  { name: 'GET task id with NUL', method: 'GET', path: '/api/headless/a%00', options: {}, status: 404, code: 'run_not_found' },
  { name: 'retire a session id with NUL', method: 'POST', path: '/api/sessions/a%00b/retire', options: {}, status: 404, code: 'session_not_found' },
  { name: 'mark read an item id with NUL', method: 'POST', path: '/api/workspaces/ws/inbox/a%00/read', options: {}, status: 404, code: 'inbox_item_not_found' },
  {
    name: 'cancel by an empty form post (no preflight)',
    method: 'POST',
    path: '/api/headless/run_x/cancel',
    options: { body: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'MCP batch of 21 calls',
    method: 'POST',
    path: '/mcp',
    options: json(Array.from({ length: 21 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'tools/list' }))),
    status: 400,
    code: 'invalid_body',
  },
  {
    name: 'MCP body over 256 KiB',
    method: 'POST',
    path: '/mcp',
    options: json({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(300_000) } }),
    status: 413,
    code: 'body_too_large',
  },
  { name: 'unknown session', method: 'GET', path: '/api/sessions/ses_nope', options: {}, status: 404, code: 'session_not_found' },
  { name: 'retire unknown session', method: 'POST', path: '/api/sessions/ses_nope/retire', options: {}, status: 404, code: 'session_not_found' },
  {
    name: 'cancel with a form body',
    method: 'POST',
    path: '/api/headless/run_x/cancel',
    options: { body: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
    status: 415,
    code: 'unsupported_media_type',
  },
  { name: 'cancel with a JSON body', method: 'POST', path: '/api/headless/run_x/cancel', options: json({ force: true }), status: 400, code: 'invalid_body' },
  { name: 'unknown route', method: 'GET', path: '/api/nope', options: {}, status: 404, code: 'not_found' },
  { name: 'trailing slash', method: 'GET', path: '/api/headless/', options: {}, status: 404, code: 'not_found' },
  { name: 'TRACE', method: 'TRACE', path: '/api/headless', options: {}, status: 405, code: 'method_not_allowed' },
  { name: 'DELETE run', method: 'DELETE', path: '/api/headless/run_x', options: {}, status: 405, code: 'method_not_allowed' },
  {
    name: 'foreign OPTIONS preflight',
    method: 'OPTIONS',
    path: START,
    options: { headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } },
    status: 403,
    code: 'forbidden',
  },
  // Gate (§4.2)
  { name: 'rebinding Host on POST', options: { ...json({ prompt: 'x' }), headers: { host: 'evil.example:47331' } }, status: 403, code: 'forbidden' },
  {
    name: 'rebinding Host on GET',
    method: 'GET',
    path: '/api/headless?wsId=ws',
    options: { headers: { host: 'evil.example:47331' } },
    status: 403,
    code: 'forbidden',
  },
  { name: 'empty Host', method: 'GET', path: '/api/headless?wsId=ws', options: { headers: { host: '' } }, status: 403, code: 'forbidden' },
  { name: 'Host :47331', method: 'GET', path: '/api/headless?wsId=ws', options: { headers: { host: ':47331' } }, status: 403, code: 'forbidden' },
  {
    name: 'Host localhost.evil.com',
    method: 'GET',
    path: '/api/headless?wsId=ws',
    options: { headers: { host: 'localhost.evil.com' } },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'Host 127.0.0.1.nip.io',
    method: 'GET',
    path: '/api/headless?wsId=ws',
    options: { headers: { host: '127.0.0.1.nip.io' } },
    status: 403,
    code: 'forbidden',
  },
  { name: 'Origin evil', options: { ...json({ prompt: 'x' }), headers: { origin: 'https://evil.example' } }, status: 403, code: 'forbidden' },
  { name: 'Origin null', options: { ...json({ prompt: 'x' }), headers: { origin: 'null' } }, status: 403, code: 'forbidden' },
  // Another port of the same host is another origin (another local service's page).
  { name: 'Origin on another port', options: { ...json({ prompt: 'x' }), headers: { origin: 'http://localhost:9999' } }, status: 403, code: 'forbidden' },
  {
    name: 'Origin evil with admin token',
    options: { ...json({ prompt: 'x' }), headers: { origin: 'https://evil.example', authorization: `Bearer ${ADMIN_TOKEN}` } },
    status: 403,
    code: 'forbidden',
  },
  {
    name: 'Origin localhost.evil.com',
    options: { ...json({ prompt: 'x' }), headers: { origin: 'http://localhost.evil.com' } },
    status: 403,
    code: 'forbidden',
  },
  { name: 'Sec-Fetch-Site cross-site', options: { ...json({ prompt: 'x' }), headers: { 'sec-fetch-site': 'cross-site' } }, status: 403, code: 'forbidden' },
  { name: 'Sec-Fetch-Site same-site', options: { ...json({ prompt: 'x' }), headers: { 'sec-fetch-site': 'same-site' } }, status: 403, code: 'forbidden' },
  {
    name: 'loopback peer with X-Forwarded-For',
    options: { ...json({ prompt: 'x' }), headers: { 'x-forwarded-for': '127.0.0.1' } },
    status: 401,
    code: 'unauthorized',
  },
  { name: 'loopback peer with X-Real-IP', options: { ...json({ prompt: 'x' }), headers: { 'x-real-ip': '127.0.0.1' } }, status: 401, code: 'unauthorized' },
  { name: 'loopback peer with Forwarded', options: { ...json({ prompt: 'x' }), headers: { forwarded: 'for=127.0.0.1' } }, status: 401, code: 'unauthorized' },
  { name: 'remote peer, no token', options: { ...json({ prompt: 'x' }), remote: '203.0.113.9' }, status: 401, code: 'unauthorized' },
  {
    name: 'remote peer, short wrong token',
    options: { ...json({ prompt: 'x' }), remote: '203.0.113.9', headers: { authorization: 'Bearer x' } },
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'remote peer, same-length wrong token',
    options: { ...json({ prompt: 'x' }), remote: '203.0.113.9', headers: { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}X` } },
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'remote peer, long wrong token',
    options: { ...json({ prompt: 'x' }), remote: '203.0.113.9', headers: { authorization: `Bearer ${'a'.repeat(500)}` } },
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'remote peer, token in query',
    path: `${START}?token=${ADMIN_TOKEN}`,
    options: { ...json({ prompt: 'x' }), remote: '203.0.113.9' },
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'remote peer, X-Forwarded-For 127.0.0.1',
    options: { ...json({ prompt: 'x' }), remote: '203.0.113.9', headers: { 'x-forwarded-for': '127.0.0.1' } },
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'local caller with a wrong token',
    options: { ...json({ prompt: 'x' }), headers: { authorization: 'Bearer wrong' } },
    status: 401,
    code: 'unauthorized',
  },
  { name: 'local caller with Basic auth', options: { ...json({ prompt: 'x' }), headers: { authorization: 'Basic YTpi' } }, status: 401, code: 'unauthorized' },
];
