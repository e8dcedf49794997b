import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ApprovalRecord } from '../../src/core/index';
import { faultyKeyv, refusingFirst } from '../helpers/faulty-store';
import { type TestHost, closeAllHosts, createTestHost, fakeAgent, problem } from '../helpers/harness';
import { waitFor } from '../helpers/wait';
import { startReceiver } from '../helpers/receiver';
import { Webhook } from 'standardwebhooks';

const SECRET = `whsec_${Buffer.from('approvals-webhook-secret-0123456789').toString('base64')}`;

/**
 * The approval bridge (docs/approvals.md) through the handler: gemini over ACP is the fake CLI
 * replaying gemini's recorded ACP transcript (test/fixtures/transcripts/gemini-acp.json), whose
 * file-writing turn asks for permission exactly as the real one does.
 */
const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
afterEach(closeAllHosts);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A host whose workspace `ws` asks (its own folder, gemini over ACP), and `other` runs the fake agent. */
async function host(approvals: Record<string, unknown> = {}, more: Record<string, unknown> = {}): Promise<TestHost & { ws: string }> {
  const ws = mkdtempSync(join(tmpdir(), 'hrw-ask-'));
  dirs.push(ws);
  const h = await createTestHost({
    workspaces: [
      {
        id: 'ws',
        path: ws,
        agents: ['gemini-acp', 'gemini'],
        run: { permissions: 'ask', approvals },
        env: { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' },
      },
      { id: 'other', path: ws, agents: ['fake'] },
    ],
    agents: { fake: fakeAgent },
    ...more,
  });
  return Object.assign(h, { ws });
}

async function start(h: TestHost, prompt: string, agent = 'gemini-acp') {
  const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent, prompt } });
  const body = (await res.json()) as Record<string, any>;
  expect(res.status, JSON.stringify(body)).toBe(202);
  return body.taskId as string;
}

async function pendingOf(h: TestHost, taskId: string): Promise<ApprovalRecord> {
  let found: ApprovalRecord | undefined;
  await waitFor(
    async () => {
      const list = (await (await h.request('GET', `/api/approvals?taskId=${taskId}`)).json()) as { approvals: ApprovalRecord[] };
      found = list.approvals.find((a) => a.status === 'pending');
      return found !== undefined;
    },
    { what: 'the run’s question' },
  );
  return found!;
}

const answer = (h: TestHost, id: string, json: unknown) => h.request('POST', `/api/approvals/${id}`, { json });
const events = async (h: TestHost, taskId: string) =>
  ((await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string; data: any }> }).events;

describe('a run under permissions "ask" (docs/approvals.md)', () => {
  it('waits on its question, shown on the list, its record and its timeline; allowed, the agent writes its file and the run succeeds', async () => {
    const h = await host();
    const taskId = await start(h, 'WRITE_FILE allowed.txt');
    const question = await pendingOf(h, taskId);
    expect(question).toMatchObject({
      taskId,
      workspaceId: 'ws',
      agent: 'gemini-acp',
      status: 'pending',
      fallback: 'deny',
      answer: null,
      tool: { title: 'Writing to allowed.txt', kind: 'edit', paths: [join(h.ws, 'allowed.txt')], canAlways: true },
    });
    expect(Date.parse(question.expiresAt) - Date.parse(question.createdAt)).toBe(15 * 60_000);
    const running = (await (await h.request('GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
    expect(running).toMatchObject({ status: 'running', approvals: { asked: 1, pending: [question.id] }, policy: { permissions: 'ask' } });
    expect(existsSync(join(h.ws, 'allowed.txt'))).toBe(false);
    // Every pending question, with no filter.
    const all = (await (await h.request('GET', '/api/approvals')).json()) as { approvals: ApprovalRecord[] };
    expect(all.approvals.map((a) => a.id)).toEqual([question.id]);

    const res = await answer(h, question.id, { decision: 'allow' });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'allowed', answer: { decision: 'allow', scope: 'once', by: 'caller' } });
    const done = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(done).toMatchObject({ status: 'succeeded', approvals: { asked: 1, allowed: 1, denied: 0, timedOut: 0, pending: [] } });
    expect(existsSync(join(h.ws, 'allowed.txt'))).toBe(true);
    const types = (await events(h, taskId)).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['permission.requested', 'permission.answered']));
    expect(types.indexOf('permission.requested')).toBeLessThan(types.indexOf('permission.answered'));
  });

  it('denied: the agent is refused, its file is not written, and the run goes on to its end', async () => {
    const h = await host();
    const taskId = await start(h, 'WRITE_FILE denied.txt');
    const question = await pendingOf(h, taskId);
    expect((await answer(h, question.id, { decision: 'deny' })).status).toBe(200);
    const done = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(done).toMatchObject({ status: 'succeeded', approvals: { asked: 1, allowed: 0, denied: 1 } });
    expect(existsSync(join(h.ws, 'denied.txt'))).toBe(false);
    const answered = (await events(h, taskId)).find((e) => e.type === 'permission.answered');
    expect(answered?.data).toMatchObject({ id: question.id, decision: 'deny', by: 'caller' });
  });

  it('unanswered: its time runs out and it gets its fallback (deny by default), which the record counts', async () => {
    const h = await host({ timeoutMs: 300 });
    const taskId = await start(h, 'WRITE_FILE late.txt');
    const done = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(done).toMatchObject({ status: 'succeeded', policy: { approvals: { timeoutMs: 300, fallback: 'deny' } }, approvals: { denied: 1, timedOut: 1 } });
    expect(existsSync(join(h.ws, 'late.txt'))).toBe(false);
    const list = (await (await h.request('GET', `/api/approvals?taskId=${taskId}`)).json()) as { approvals: ApprovalRecord[] };
    expect(list.approvals).toEqual([expect.objectContaining({ status: 'denied', answer: expect.objectContaining({ decision: 'deny', by: 'fallback' }) })]);
    // Answered once: a late caller is told so.
    const late = await answer(h, list.approvals[0]!.id, { decision: 'allow' });
    expect(await problem(late)).toMatchObject({ status: 409, code: 'approval_answered' });
  });

  it('a fallback of "allow" lets the agent go on', async () => {
    const h = await host({ timeoutMs: 300, fallback: 'allow' });
    const taskId = await start(h, 'WRITE_FILE fallback.txt');
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1, timedOut: 1 } });
    expect(existsSync(join(h.ws, 'fallback.txt'))).toBe(true);
  });

  it('rules answer without asking: by kind of tool and folder, the first that matches', async () => {
    const h = await host({
      rules: [
        { kinds: ['edit'], paths: ['docs'], answer: 'deny' },
        { kinds: ['edit'], answer: 'allow' },
      ],
    });
    const allowed = await start(h, 'WRITE_FILE ruled.txt');
    expect(await h.waitEnded(allowed)).toMatchObject({ status: 'succeeded' });
    expect(existsSync(join(h.ws, 'ruled.txt'))).toBe(true);
    const list = (await (await h.request('GET', '/api/approvals?workspace=ws')).json()) as { approvals: ApprovalRecord[] };
    expect(list.approvals).toEqual([]);
  });

  it('a question whose shown title is cut is asked whatever the rules say, marked where cut', async () => {
    const h = await host({ rules: [{ kinds: ['edit'], answer: 'allow' }] });
    const name = `long-${'x'.repeat(600)}`;
    const taskId = await start(h, `WRITE_FILE ${name}`);
    const question = await pendingOf(h, taskId);
    expect(question.tool).toMatchObject({ kind: 'edit', truncated: true });
    expect(question.tool.title).toMatch(/^Writing to long-x+… \[cut: \d+ more characters\]$/);
    expect(question.tool.title.length).toBeLessThan(560);
    expect((await answer(h, question.id, { decision: 'deny' })).status).toBe(200);
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded', approvals: { denied: 1 } });
  });

  it('an answer for the run: the agent is offered its own "always" option', async () => {
    const h = await host();
    const taskId = await start(h, 'WRITE_FILE always.txt');
    const question = await pendingOf(h, taskId);
    const res = await answer(h, question.id, { decision: 'allow', scope: 'run' });
    expect(await res.json()).toMatchObject({ answer: { scope: 'run' } });
    // The recorded transcript's "always" option is `proceed_always`: the fake accepts it as an allow.
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1 } });
    expect(existsSync(join(h.ws, 'always.txt'))).toBe(true);
  });

  it('bad answers get problems: unknown question, bad body, answered twice', async () => {
    const h = await host();
    expect(await problem(await answer(h, 'apr_nope', { decision: 'allow' }))).toMatchObject({ status: 404, code: 'approval_not_found' });
    expect(await problem(await h.request('GET', '/api/approvals/apr_nope'))).toMatchObject({ status: 404, code: 'approval_not_found' });
    const taskId = await start(h, 'WRITE_FILE twice.txt');
    const question = await pendingOf(h, taskId);
    expect(await problem(await answer(h, question.id, { decision: 'maybe' }))).toMatchObject({ status: 400, code: 'invalid_body' });
    expect(await problem(await answer(h, question.id, { decision: 'allow', extra: 1 }))).toMatchObject({ status: 400, code: 'invalid_body' });
    expect(
      await problem(await h.request('POST', `/api/approvals/${question.id}`, { body: 'not json', headers: { 'content-type': 'application/json' } })),
    ).toMatchObject({
      status: 400,
    });
    expect((await answer(h, question.id, { decision: 'deny' })).status).toBe(200);
    const again = await answer(h, question.id, { decision: 'allow' });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({ code: 'approval_answered', approval: { status: 'denied' } });
    expect(await problem(await h.request('GET', '/api/approvals?status=maybe'))).toMatchObject({ status: 400, code: 'invalid_body' });
    expect(await problem(await h.request('GET', '/api/approvals?workspace=nope'))).toMatchObject({ status: 404, code: 'workspace_not_found' });
    await h.waitEnded(taskId);
  });

  it('an agent that cannot ask is refused under "ask", saying which can', async () => {
    const h = await host();
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini', prompt: 'hello', wait: true } });
    const body = (await res.json()) as Record<string, any>;
    expect(body).toMatchObject({ code: 'spawn_failed' });
    expect(body.detail).toMatch(/gemini cannot ask for permissions .*gemini-acp/);
  });

  it('the run ends while its question waits (its watchdog): the question is abandoned, and nothing waits any more', async () => {
    const h = await host();
    const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini-acp', prompt: 'WRITE_FILE cut.txt', timeoutMs: 60_000 } });
    const { taskId } = (await res.json()) as { taskId: string };
    const question = await pendingOf(h, taskId);
    expect((await h.request('POST', `/api/headless/${taskId}/cancel`)).status).toBe(202);
    const done = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(done).toMatchObject({ status: 'cancelled', approvals: { asked: 1, pending: [] } });
    const after = (await (await h.request('GET', `/api/approvals/${question.id}`)).json()) as ApprovalRecord;
    expect(after).toMatchObject({ status: 'abandoned', answer: null });
    expect(await problem(await answer(h, question.id, { decision: 'allow' }))).toMatchObject({ status: 409, code: 'approval_answered' });
  });
});

describe('when the store fails', () => {
  it('a question the store refuses is never left waiting: the agent is refused (the safe answer), the run goes on, the timeline says why', async () => {
    const store = faultyKeyv();
    store.state.refuse = (write) => write.key.startsWith('approvals:');
    const h = await host({}, { store: store.keyv() });
    const taskId = await start(h, 'WRITE_FILE refused-store.txt');
    const done = (await h.waitEnded(taskId)) as Record<string, any>;
    expect(done.status).toBe('succeeded');
    expect(done).not.toHaveProperty('approvals');
    expect(existsSync(join(h.ws, 'refused-store.txt'))).toBe(false);
    expect(store.state.refused.length).toBe(1);
    const errors = (await events(h, taskId)).filter((e) => e.type === 'error').map((e) => e.data.message);
    expect(errors).toContain('A permission the agent asked for was refused: the question could not be stored.');
  });

  /**
   * A run asking, over a store that refuses the first write of an answer (`allowed`), and with
   * `crash` every write after it; the question is answered once, and refused.
   */
  async function answerRefused(crash: boolean, file: string) {
    const store = faultyKeyv();
    store.state.refuse = refusingFirst((w) => w.key.startsWith('approvals:') && (w.value as { status?: string } | undefined)?.status === 'allowed', crash);
    const h = await host({}, { store: store.keyv() });
    const taskId = await start(h, `WRITE_FILE ${file}`);
    const question = await pendingOf(h, taskId);
    return { store, h, taskId, question, refused: await answer(h, question.id, { decision: 'allow' }) };
  }

  it('an answer the store refuses is a 503, and the question still waits: answered again, the run goes on', async () => {
    const { h, taskId, question, refused } = await answerRefused(false, 'answered-twice.txt');
    expect(refused.status).toBe(503);
    expect(await problem(refused)).toMatchObject({ code: 'storage_unavailable' });
    expect(await (await h.request('GET', `/api/approvals/${question.id}`)).json()).toMatchObject({ status: 'pending', answer: null });
    expect((await answer(h, question.id, { decision: 'allow' })).status).toBe(200);
    expect((await h.waitEnded(taskId)).status).toBe('succeeded');
    expect(existsSync(join(h.ws, 'answered-twice.txt'))).toBe(true);
  });

  it('a crash as an answer is written: after the restart the run and its question are interrupted, and the question cannot be answered', async () => {
    const { store, h: first, taskId, question, refused } = await answerRefused(true, 'never.txt');
    expect(refused.status).toBe(503);
    await first.close();
    store.state.refuse = undefined;
    const again = await host({}, { store: store.keyv() });
    expect((await again.waitEnded(taskId)).status).toBe('interrupted');
    expect(await (await again.request('GET', `/api/approvals/${question.id}`)).json()).toMatchObject({ status: 'interrupted', answer: null });
    expect((await answer(again, question.id, { decision: 'allow' })).status).toBe(409);
    expect(existsSync(join(first.ws, 'never.txt'))).toBe(false);
  });
});

describe('permission.requested webhooks', () => {
  it('each question is told to the run’s webhook that asked for it, once, signed, its record as the payload', async () => {
    const receiver = await startReceiver();
    try {
      const h = await host({}, { webhooks: { secret: SECRET, allowPerStartUrls: true, allowPrivateTargets: true } });
      const webhook = { url: receiver.url, events: ['permission.requested', 'run.ended'] };
      const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini-acp', prompt: 'WRITE_FILE hooked.txt', webhook } });
      const { taskId } = (await res.json()) as { taskId: string };
      await waitFor(() => receiver.received.length >= 1, { what: 'the permission.requested webhook' });
      const asked = receiver.received[0]!;
      const payload = JSON.parse(asked.body) as { type: string; data: ApprovalRecord };
      expect(payload).toMatchObject({ type: 'permission.requested', data: { taskId, status: 'pending', tool: { kind: 'edit' } } });
      expect(new Webhook(SECRET).verify(asked.body, asked.headers)).toBeTruthy();
      expect(asked.headers['webhook-id']).toBe(`msg_${taskId}_0_permission_requested_${payload.data.id}`);
      expect((await answer(h, payload.data.id, { decision: 'allow' })).status).toBe(200);
      const done = (await h.waitEnded(taskId)) as Record<string, any>;
      await waitFor(() => receiver.received.length >= 2, { what: 'the run.ended webhook' });
      expect(receiver.received.map((r) => JSON.parse(r.body).type)).toEqual(['permission.requested', 'run.ended']);
      // The receiver has the body before the service has written down its answer.
      const record = async () => (await (await h.request('GET', `/api/headless/${taskId}`)).json()) as Record<string, any>;
      await waitFor(async () => (await record()).webhooks.every((w: { state: string }) => w.state === 'delivered'), { what: 'both deliveries recorded' });
      const final = await record();
      expect(final.webhooks).toEqual([
        expect.objectContaining({ event: 'permission.requested', state: 'delivered' }),
        expect.objectContaining({ event: 'run.ended', state: 'delivered' }),
      ]);
      expect(done.status).toBe('succeeded');
    } finally {
      await receiver.close();
    }
  });
});

describe('who may answer', () => {
  it('only a caller: a run’s own token can neither read nor answer questions', async () => {
    const token = 'admin-secret-token-0123456789abcdef';
    const h = await host({}, { adminToken: token });
    const admin = { authorization: `Bearer ${token}` };
    const started = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini-acp', prompt: 'WRITE_FILE token.txt' }, headers: admin });
    const { taskId } = (await started.json()) as { taskId: string };
    let question: ApprovalRecord | undefined;
    await waitFor(async () => {
      question = ((await (await h.request('GET', '/api/approvals', { headers: admin })).json()) as { approvals: ApprovalRecord[] }).approvals[0];
      return question !== undefined;
    });
    // A live run's token, read from what the fake agent prints.
    const release = join(h.ws, 'release');
    const other = await h.request('POST', '/api/workspaces/other/headless', {
      json: { agent: 'fake', prompt: `dump-env; wait-file ${release}` },
      headers: admin,
    });
    const otherId = ((await other.json()) as { taskId: string }).taskId;
    let runToken = '';
    await waitFor(async () => {
      const out = (await (await h.request('GET', `/api/headless/${otherId}/output`, { headers: admin })).json()) as { stdout: string };
      runToken = /"HEADLESS_RUN_TOKEN":"([^"]+)"/.exec(out.stdout)?.[1] ?? '';
      return runToken !== '';
    });
    const asRun = { authorization: `Bearer ${runToken}` };
    // Answering with it is refused as coming from a run (docs/approvals.md: Who answers).
    const byRun = await h.request('POST', `/api/approvals/${question!.id}`, { json: { decision: 'allow' }, headers: asRun });
    expect(byRun.status).toBe(403);
    expect(await byRun.json()).toMatchObject({ code: 'approval_from_run', detail: expect.stringContaining(`run "${otherId}" (its run token)`) });
    expect((await h.request('GET', '/api/approvals', { headers: asRun })).status).toBe(401);
    expect(((await (await h.request('GET', `/api/approvals/${question!.id}`, { headers: admin })).json()) as ApprovalRecord).status).toBe('pending');
    expect((await h.request('GET', '/api/approvals', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await h.request('GET', `/api/approvals/${question!.id}`, { headers: admin })).status).toBe(200);
    writeFileSync(release, '');
    await h.request('POST', `/api/headless/${taskId}/cancel`, { headers: admin });
    await h.waitEnded(otherId);
  });
});
