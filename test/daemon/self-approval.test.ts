import { chownSync, existsSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApprovalRecord } from '../../src/core/index';
import { FAKE_AGENT, fakeAgent } from '../helpers/harness';
import { type Daemon, api, cleanupDaemons, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';

/**
 * docs/approvals.md, Who answers: an agent never answers a permission question, its own or
 * another run's, under the default `trusted` local callers: not over TCP without a credential,
 * not with its run token, not over the daemon's Unix socket, not from a sandbox through its
 * egress proxy. The test itself, a local caller outside every run, still answers.
 */
const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
const ANSWER = resolve(__dirname, '../fixtures/answer-approval.mjs');
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

let sandboxWorks: boolean | undefined;

async function daemonWithQuestion(): Promise<{ daemon: Daemon; ws: string; socket: string; question: ApprovalRecord; asking: string }> {
  const dir = tempDir();
  dirs.push(dir);
  const ws = join(dir, 'ask');
  mkdirSync(ws);
  mkdirSync(join(dir, 'box'));
  // Under a root daemon the sandboxed workspace is the sandbox user's, as its operator makes it (docs/security.md).
  if (process.getuid?.() === 0) chownSync(join(dir, 'box'), 65532, 65532);
  const env = { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' };
  writeConfig(dir, {
    sandbox: { readable: [FAKE_AGENT, ANSWER] },
    agents: { fake: fakeAgent },
    workspaces: [
      { id: 'ask', path: ws, agents: ['gemini-acp'], run: { permissions: 'ask' }, env },
      { id: 'ws', path: '.', agents: ['fake'] },
      { id: 'box', path: 'box', agents: ['fake'], run: { sandbox: true } },
    ],
  });
  const socket = join(dir, 'api.sock');
  const daemon = await startDaemon(dir, ['--port', '0', '--socket', socket]);
  const started = await api(daemon, 'POST', '/api/workspaces/ask/headless', { agent: 'gemini-acp', prompt: 'WRITE_FILE approved.txt' });
  const asking = ((await started.json()) as { taskId: string }).taskId;
  let question: ApprovalRecord | undefined;
  await waitFor(
    async () => {
      const listed = (await (await api(daemon, 'GET', `/api/approvals?taskId=${asking}&status=pending`)).json()) as { approvals: ApprovalRecord[] };
      question = listed.approvals[0];
      return question !== undefined;
    },
    { what: 'the question' },
  );
  return { daemon, ws, socket, question: question as ApprovalRecord, asking };
}

/** Runs the answering script as an agent of workspace `workspace`; returns its output. */
async function agentAnswers(daemon: Daemon, workspace: string, id: string, socket?: string): Promise<string> {
  const prompt = `sh ${process.execPath} ${ANSWER} ${id}${socket ? ` ${socket}` : ''}`;
  const res = await api(daemon, 'POST', `/api/workspaces/${workspace}/headless`, { agent: 'fake', prompt, wait: true });
  const record = (await res.json()) as { output?: { stdout?: string } };
  return record.output?.stdout ?? JSON.stringify(record);
}

/** The test's own answer (allow) over the daemon's Unix socket: its status. */
function socketAnswer(socketPath: string, id: string): Promise<number | undefined> {
  return new Promise((done, fail) => {
    const req = request(
      { socketPath, method: 'POST', path: `/api/approvals/${id}`, headers: { host: 'localhost', 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode));
      },
    );
    req.on('error', fail);
    req.end(JSON.stringify({ decision: 'allow' }));
  });
}

describe('nobody answers their own question (trusted local callers)', () => {
  it('an unconfined agent is refused over TCP, with its run token and over the Unix socket; the test itself answers', async () => {
    const { daemon, ws, socket, question, asking } = await daemonWithQuestion();
    const output = await agentAnswers(daemon, 'ws', question.id, socket);
    expect(output).toContain('answer none 403 approval_from_run');
    expect(output).toContain('answer token 403 approval_from_run');
    expect(output).toContain('answer socket 403 approval_from_run');
    expect(((await (await api(daemon, 'GET', `/api/approvals/${question.id}`)).json()) as ApprovalRecord).status).toBe('pending');

    // Over the same socket, a caller outside every run answers.
    expect(await socketAnswer(socket, question.id)).toBe(200);
    expect(await waitRun(daemon, asking)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1 } });
    expect(existsSync(join(ws, 'approved.txt'))).toBe(true);
  });

  it('a sandboxed agent, reaching the service through its egress proxy, is refused', async (context) => {
    const { daemon, question } = await daemonWithQuestion();
    const output = await agentAnswers(daemon, 'box', question.id);
    sandboxWorks ??= !output.includes('bubblewrap');
    if (!sandboxWorks) return context.skip();
    // Through its egress proxy it is no local caller at all (docs/security.md), so without a token it is not even let in.
    expect(output).toContain('answer none 401 unauthorized');
    expect(output).toContain('answer token 403 approval_from_run');
    const res = await api(daemon, 'POST', `/api/approvals/${question.id}`, { decision: 'deny' });
    expect(res.status).toBe(200);
  });
});
