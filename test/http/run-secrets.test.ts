import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { CommandAgentDefinition } from '../../src/core/agents/command-agent';
import { createSqliteKeyv } from '../../src/core/store/keyvs';
import { RunSecrets, redactText, redactValue } from '../../src/core/runs/run-secrets';
import { shownText } from '../../src/core/util/text';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import type { AgentAdapter } from '../../src/core/agents/types';
import { type TestHost, closeAllHosts, createTestHost, memoryLogger } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { everything } from '../helpers/files';

/**
 * docs/security.md "Per-run secrets": a start's secrets reach its agent and its checks as
 * variables and nowhere else. The agent here is hostile: it prints its secret on stdout (as is
 * and inside a JSON string) and on stderr, its check prints it, and it fails saying it (the
 * Inbox, which needs a listening service, is the daemon tier's: test/daemon/secrets.test.ts).
 */

const SECRET = 'sk-live-Zq8"x\\Ynot-for-anyone';
const NAMED = 'operator-named-value-42';
const dirs: string[] = [];
/** A workspace folder, removed with the others after the file. */
const workspaceDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-secret-ws-'));
  dirs.push(dir);
  return dir;
};
afterEach(async () => {
  await closeAllHosts();
});
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const hostile: CommandAgentDefinition = {
  command: 'sh',
  args: [
    '-c',
    [
      'echo "plain: $API_KEY"',
      'printf \'{"said":"%s"}\\n\' "$(printf %s "$API_KEY" | sed \'s/\\\\/\\\\\\\\/g; s/"/\\\\"/g\')"',
      'echo "to stderr: $API_KEY" >&2',
      'echo "named: [$NPM_TOKEN]"',
      'echo session=s-1',
      'test "$1" = fail && { echo "failing with $API_KEY" >&2; exit 3; }',
      'true',
    ].join('\n'),
    'sh',
    '{prompt}',
  ],
  resumeArgs: ['-c', 'echo "again: $API_KEY"; echo session=s-1', 'sh', '{prompt}'],
  sessionIdPattern: 'session=([A-Za-z0-9-]+)',
};

async function host(o: { data: string; logger?: ReturnType<typeof memoryLogger>['logger']; webhookUrl?: string }): Promise<TestHost> {
  return createTestHost({
    store: await createSqliteKeyv(o.data),
    workspaces: [{ id: 'ws', path: workspaceDir(), agents: ['hostile'] }],
    agents: { hostile },
    secrets: { npm: NAMED },
    env: { ...process.env, NPM_TOKEN: NAMED },
    ...(o.logger ? { logger: o.logger } : {}),
    ...(o.webhookUrl ? { webhooks: { secret: 'whsec_c2VjcmV0LXNpZ25pbmcta2V5LTMyLWJ5dGVzISE=', allowPerStartUrls: true, allowPrivateTargets: true } } : {}),
  });
}

describe('per-run secrets', () => {
  it('reach the agent and its checks, and nothing the service keeps or sends: record, timeline, output, webhook, logs, store', async () => {
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const posted: string[] = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        posted.push(body);
        res.end();
      });
    });
    await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done));
    const { port } = receiver.address() as AddressInfo;
    const log = memoryLogger();
    try {
      const h = await host({ data, logger: log.logger, webhookUrl: `http://127.0.0.1:${port}/hook` });
      const res = await h.request('POST', '/api/workspaces/ws/headless', {
        headers: { 'idempotency-key': 'with-secrets' },
        json: {
          prompt: 'ok',
          agent: 'hostile',
          secrets: { API_KEY: SECRET, NPM_TOKEN: { secret: 'npm' } },
          webhook: { url: `http://127.0.0.1:${port}/hook` },
          verify: { checks: [{ name: 'sees it', command: 'echo "check: $API_KEY"; test -n "$API_KEY"' }], maxAttempts: 1 },
        },
      });
      const { taskId } = (await res.json()) as { taskId: string };
      expect(res.status).toBe(202);
      const run = await h.waitEnded(taskId);
      expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', secrets: [{ name: 'API_KEY' }, { name: 'NPM_TOKEN', secret: 'npm' }] });
      const output = await (await h.request('GET', `/api/headless/${taskId}/output`)).json();
      const events = await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json();
      await waitFor(() => posted.length > 0, { what: 'the run.ended webhook' });
      const seen = JSON.stringify([run, output, events, posted, log.lines]);
      // Given: the agent and its check printed it, and each print shows where it was.
      expect(seen).toContain('plain: [secret API_KEY]');
      expect(seen).toContain('to stderr: [secret API_KEY]');
      expect(seen).toContain('check: [secret API_KEY]');
      expect(seen).toContain('named: [[secret NPM_TOKEN]]');
      for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1), NAMED]) {
        expect(seen).not.toContain(form);
        expect(everything(data)).not.toContain(form);
      }
      // Inside a JSON string the value is escaped: that form is taken out too.
      expect((output as { stdout: string }).stdout).toContain('{"said":"[secret API_KEY]"}');
    } finally {
      receiver.closeAllConnections();
      receiver.close();
    }
  });

  it('an operator’s named secret reaches only the runs that name it, not the others through the environment', async () => {
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const h = await host({ data });
    const { taskId } = (await (await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'ok', agent: 'hostile' } })).json()) as {
      taskId: string;
    };
    await h.waitEnded(taskId);
    const output = (await (await h.request('GET', `/api/headless/${taskId}/output`)).json()) as { stdout: string };
    expect(output.stdout).toContain('named: []');
  });

  it('a failing agent’s reason is told without it', async () => {
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const h = await host({ data });
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'fail', agent: 'hostile', secrets: { API_KEY: SECRET } } });
    const run = await h.waitEnded(((await res.json()) as { taskId: string }).taskId);
    expect(run).toMatchObject({ status: 'failed' });
    expect(JSON.stringify(run)).toContain('failing with [secret API_KEY]');
    expect(JSON.stringify(run)).not.toContain(SECRET);
  });

  it('refuses what it cannot keep: a reserved or malformed name, a short or multi-line value, an operator secret that does not exist, more than 32', async () => {
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const h = await host({ data });
    const cases: Array<[unknown, RegExp]> = [
      [{ PATH: SECRET }, /"secrets\.PATH" is invalid: a name the service keeps for itself/],
      [{ HEADLESS_RUN_TOKEN: SECRET }, /a name the service keeps for itself/],
      [{ 'A-B': SECRET }, /an environment variable name/],
      [{ API_KEY: 'short' }, /"secrets\.API_KEY" is invalid/],
      [{ API_KEY: 'two\nlines here' }, /"secrets\.API_KEY" is invalid/],
      [{ API_KEY: { secret: 'nope' } }, /names no secret of the operator's \("nope"\): it has npm/],
      [Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`K${i}`, SECRET])), /at most 32 secrets/],
    ];
    for (const [secrets, detail] of cases) {
      const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'ok', agent: 'hostile', secrets } });
      const problem = (await res.json()) as { code: string; detail: string };
      expect(res.status, JSON.stringify(problem)).toBe(400);
      expect(problem.detail).toMatch(detail);
      expect(JSON.stringify(problem)).not.toContain(SECRET);
    }
  });

  it('hidden from the raw line, found once decoded: a value written in JSON escapes, split by ANSI or invisible characters, in a check or a failure', async () => {
    // Claude Code's parser over a script: its message and its tool name spell the value in \\u escapes, which the raw line does not show.
    const claude = BUILTIN_AGENTS.find((a) => a.name === 'claude') as AgentAdapter;
    const escaped = [...'SUPERsecretVALUE_42'].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    const lines = [
      `{"type":"assistant","session_id":"e-1","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"${escaped}","input":{}}]}}`,
      `{"type":"result","subtype":"success","is_error":false,"result":"final: ${escaped}","session_id":"e-1"}`,
    ];
    const escaper: AgentAdapter = {
      ...claude,
      name: 'escaper',
      command: 'sh',
      identity: undefined,
      invocation: () => ({ command: 'sh', args: ['-c', `printf '%s\\n' '${lines.join("' '")}'`] }),
    };
    const splitter: CommandAgentDefinition = {
      command: 'sh',
      args: ['-c', 'printf "SUPER\\033[1msecretVALUE_42\\n" >&2; exit 1', 'sh', '{prompt}'],
    };
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const h = await createTestHost({
      store: await createSqliteKeyv(data),
      workspaces: [{ id: 'ws', path: workspaceDir(), agents: ['escaper', 'splitter', 'hostile'], env: { AGENT_MODE: 'careful' } }],
      agents: { escaper: escaper as never, splitter, hostile },
    });
    const start = async (body: Record<string, unknown>) =>
      h.waitEnded(((await (await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'ok', ...body } })).json()) as { taskId: string }).taskId);
    const secrets = { K: 'SUPERsecretVALUE_42' };
    const decoded = await start({ agent: 'escaper', secrets });
    const events = await (await h.request('GET', `/api/headless/${decoded.taskId}/events?format=json`)).json();
    expect(decoded).toMatchObject({ status: 'succeeded', lastMessage: 'final: [secret K]' });
    expect(JSON.stringify(events)).toContain('"name":"[secret K]"');
    const failed = await start({ agent: 'splitter', secrets });
    expect(failed).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('[secret K]') } });
    const check = { name: 'split', command: 'printf "SUPER\\033[1msecretVALUE_42 SUPER\\342\\200\\213secretVALUE_42\\n"; exit 1' };
    const checked = (await start({ agent: 'hostile', secrets, verify: { checks: [check], maxAttempts: 1, onExhausted: 'keep' } })) as Record<string, any>;
    expect(checked.verify.attempts[0].checks[0].output).toBe('[secret K] [secret K]\n');
    for (const run of [decoded, failed, checked, events]) expect(JSON.stringify(run)).not.toContain('SUPERsecretVALUE_42');
    expect(everything(data)).not.toContain('SUPERsecretVALUE_42');
    // A secret never replaces a variable its agent or its workspace sets.
    const clash = await start({ agent: 'hostile', secrets: { AGENT_MODE: 'anything-goes' } });
    expect(clash).toMatchObject({ status: 'failed', error: { code: 'secret_refused', message: expect.stringContaining('AGENT_MODE') } });
  });

  it('overlapping values leave no part of either; a tail cut into a value shows none of its end', () => {
    const forms = [
      { form: 'AAAAAAAABBBBBBBB', name: 'A' },
      { form: 'BBBBBBBBCCCCCCCC', name: 'B' },
    ];
    expect(redactText('x AAAAAAAABBBBBBBBCCCCCCCC y', forms)).toBe('x [secret A, B] y');
    expect(redactText('BBBBCCCCCCCC and more', forms, true)).toBe('[secret A, B] and more');
    // Not a tail: the start of a line is the agent's own.
    expect(redactText('CCCC and more', forms)).toBe('CCCC and more');
  });

  it('are refused to a run its operator confines (read-only, ask): a variable could turn its tools back on or send its key elsewhere', async () => {
    const data = mkdtempSync(join(tmpdir(), 'hrw-secret-data-'));
    dirs.push(data);
    const h = await createTestHost({
      store: await createSqliteKeyv(data),
      workspaces: [{ id: 'ro', path: workspaceDir(), agents: ['hostile'], run: { permissions: 'read-only', sandbox: true } }],
      agents: { hostile },
    });
    const res = await h.request('POST', '/api/workspaces/ro/headless', {
      json: { prompt: 'ok', agent: 'hostile', secrets: { OPENCODE_CONFIG_CONTENT: '{"mcp":{"x":{"type":"local","command":["id"]}}}' } },
    });
    const problem = (await res.json()) as { code: string; detail: string };
    expect(res.status).toBe(403);
    expect(problem).toMatchObject({ code: 'policy_loosened', detail: expect.stringContaining('"permissions": "read-only"') });
  });

  it('what no delimiter, escape, invisible character or cut can hide: each string redacted on its own; a tail cut inside a character; a grader reads with its run’s redactor', () => {
    const secrets = new RunSecrets(
      new Map([
        ['q', 'QQQQQQQQ"'],
        ['p', 'ПАРОЛЬ-1234567890'],
        ['s', 'zz/SECRET/0123456789'],
      ]),
    );
    const redact = secrets.redactor('run_1', [
      { name: 'Q', secret: 'q' },
      { name: 'P', secret: 'p' },
      { name: 'S', secret: 's' },
    ]);
    // A value holding a quote, matched across what JSON would escape: no parse to break, keys too.
    expect(redactValue({ text: 'xQQQQQQQQ"y', 'QQQQQQQQ"': ['QQQQQQQQ"'] }, redact)).toEqual({ text: 'x[secret Q]y', '[secret Q]': ['[secret Q]'] });
    expect(redact?.('\uFFFDАРОЛЬ-1234567890 rest', true)).toBe('[secret P] rest');
    expect(redact?.('zz\\/SECRET\\/0123456789')).toBe('[secret S]');
    expect(shownText('zz/SEC\u034FRET/0123\uFE0F456789')).toBe('zz/SECRET/0123456789');
    // The grader of run_1 gets its redactor while run_1 runs, and nothing once it ended.
    expect(secrets.redactorOf('run_1')).toBe(redact);
    secrets.drop('run_1');
    expect(secrets.redactorOf('run_1')).toBeUndefined();
  });

  it('in a shared fleet only references are taken: another member may run the start, and a value lives in one member’s memory', () => {
    const secrets = new RunSecrets(new Map([['npm', NAMED]]));
    expect(() => secrets.accept({ API_KEY: SECRET }, { shared: true })).toThrow(/is a value, which one member holds in memory only/);
    expect(secrets.accept({ NPM_TOKEN: { secret: 'npm' } }, { shared: true })).toEqual({ recorded: [{ name: 'NPM_TOKEN', secret: 'npm' }], given: {} });
  });
});
