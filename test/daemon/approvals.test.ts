import { existsSync, mkdirSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApprovalRecord } from '../../src/core/index';
import { CLI, type Daemon, api, cleanupDaemons, runCli, startDaemon, tempDir, waitRun, writeConfig } from '../helpers/daemon';
import { waitFor } from '../helpers/wait';
import { noneMarked } from '../helpers/processes';
import { findMarkedProcesses } from '../../src/core/process/process-tree';
import { mockEnv, writeHome } from '../fixtures/mock-model/homes.mjs';
import { type MockModel, startMockModel } from '../fixtures/mock-model/server.mjs';

/**
 * The approval bridge through the built daemon (docs/approvals.md): answered with the caller
 * CLI and over MCP, and what a question waiting when the daemon is stopped becomes. Over MCP the
 * real gemini asks against the mock model; elsewhere gemini over ACP is the fake replaying the
 * real one's recorded ACP transcript (the real one is also asked in real-agents-features.test.ts).
 */
const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
const REAL_BIN = resolve(__dirname, '../../node_modules/.bin');
const dirs: string[] = [];
afterAll(() => cleanupDaemons(dirs));

/** A daemon whose workspace `ask` asks, in its own folder: gemini over ACP, its fake, or with `mock` the real one against the mock model. */
async function askingDaemon(mock?: MockModel): Promise<{ daemon: Daemon; dir: string; ws: string }> {
  const dir = tempDir();
  dirs.push(dir);
  const ws = join(dir, 'ws');
  mkdirSync(ws);
  const home = join(dir, 'home');
  if (mock) writeHome(home, mock.url);
  const env = mock
    ? { ...mockEnv(home, mock.url, 'mock-ok'), PATH: [REAL_BIN, process.env.PATH].join(delimiter) }
    : { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' };
  writeConfig(dir, { workspaces: [{ id: 'ask', path: ws, agents: ['gemini-acp'], run: { permissions: 'ask' }, env }] });
  return { daemon: await startDaemon(dir), dir, ws };
}

async function started(daemon: Daemon, prompt: string): Promise<string> {
  const res = await api(daemon, 'POST', '/api/workspaces/ask/headless', { agent: 'gemini-acp', prompt });
  expect(res.status).toBe(202);
  return ((await res.json()) as { taskId: string }).taskId;
}

async function questionOf(daemon: Daemon, taskId: string): Promise<ApprovalRecord> {
  let found: ApprovalRecord | undefined;
  await waitFor(
    async () => {
      found = ((await (await api(daemon, 'GET', `/api/approvals?taskId=${taskId}&status=pending`)).json()) as { approvals: ApprovalRecord[] }).approvals[0];
      return found !== undefined;
    },
    { what: 'the run’s question' },
  );
  return found!;
}

describe('approvals through the daemon', () => {
  it('the caller CLI lists the questions, approves one and denies another; the agents are told at once', async () => {
    const { daemon, dir, ws } = await askingDaemon();
    const cli = (...args: string[]) => runCli([...args, '--url', daemon.url], { cwd: dir });
    const first = await started(daemon, 'WRITE_FILE approved.txt');
    const question = await questionOf(daemon, first);
    const listed = await cli('approvals');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`${question.id}  ${first}  gemini-acp  pending until ${question.expiresAt}, then deny`);
    expect(listed.stdout).toContain(`edit: Writing to approved.txt (${join(ws, 'approved.txt')})`);
    const approved = await cli('approve', question.id);
    expect(approved).toMatchObject({ code: 0, stdout: `allowed ${question.id}\n` });
    expect(await waitRun(daemon, first)).toMatchObject({ status: 'succeeded', approvals: { allowed: 1 } });
    expect(existsSync(join(ws, 'approved.txt'))).toBe(true);

    const second = await started(daemon, 'WRITE_FILE denied.txt');
    const other = await questionOf(daemon, second);
    const denied = await cli('deny', other.id, '--json');
    expect(JSON.parse(denied.stdout)).toMatchObject({ id: other.id, status: 'denied', answer: { decision: 'deny', by: 'caller' } });
    expect(await waitRun(daemon, second)).toMatchObject({ status: 'succeeded', approvals: { denied: 1 } });
    expect(existsSync(join(ws, 'denied.txt'))).toBe(false);
    // Answered twice: the service refuses, and the CLI says why.
    const again = await cli('approve', other.id);
    expect(again.code).toBe(6);
    expect(again.stderr).toContain(`approval_answered: Question "${other.id}" is already denied.`);
    const ofRun = JSON.parse((await cli('approvals', second, '--json')).stdout) as ApprovalRecord[];
    expect(ofRun.map((a) => a.id)).toEqual([other.id]);
    expect((await cli('approve')).code).toBe(2);
    await daemon.stop();
  });

  it('an AI caller answers the real gemini over MCP: list_approvals, then answer_approval', async () => {
    const mock = await startMockModel();
    const { daemon, ws } = await askingDaemon(mock);
    const client = new Client({ name: 'test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--url', daemon.url], env: { PATH: process.env.PATH! }, stderr: 'pipe' }),
    );
    try {
      const taskId = await started(daemon, 'WRITE_FILE via-mcp.txt');
      await questionOf(daemon, taskId);
      const listed = (await client.callTool({ name: 'list_approvals', arguments: {} })) as unknown as { structuredContent: { approvals: ApprovalRecord[] } };
      const question = listed.structuredContent.approvals.find((a) => a.taskId === taskId)!;
      expect(question).toMatchObject({ status: 'pending', tool: { kind: 'edit' } });
      const answered = (await client.callTool({ name: 'answer_approval', arguments: { approvalId: question.id, decision: 'allow' } })) as unknown as {
        structuredContent: ApprovalRecord;
      };
      expect(answered.structuredContent).toMatchObject({ status: 'allowed', answer: { by: 'caller' } });
      expect(await waitRun(daemon, taskId)).toMatchObject({ status: 'succeeded' });
      expect(existsSync(join(ws, 'via-mcp.txt'))).toBe(true);
      const twice = (await client.callTool({ name: 'answer_approval', arguments: { approvalId: question.id, decision: 'deny' } })) as unknown as {
        isError: boolean;
        content: Array<{ text: string }>;
      };
      expect(twice).toMatchObject({ isError: true, content: [{ text: expect.stringMatching(/^approval_answered: /) }] });
    } finally {
      await client.close();
      await daemon.stop();
      await mock.close();
    }
  });

  it('kill -9 while a question waits: after the restart its run is interrupted, the record names the question, which is interrupted and cannot be answered', async () => {
    const { daemon, dir, ws } = await askingDaemon();
    const taskId = await started(daemon, 'WRITE_FILE never.txt');
    const question = await questionOf(daemon, taskId);
    expect(await daemon.stop('SIGKILL')).toBeNull();
    const again = await startDaemon(dir);
    try {
      const record = await waitRun(again, taskId);
      expect(record).toMatchObject({ status: 'interrupted', approvals: { asked: 1, pending: [question.id] } });
      const after = (await (await api(again, 'GET', `/api/approvals/${question.id}`)).json()) as ApprovalRecord;
      expect(after).toMatchObject({ status: 'interrupted', answer: null });
      const late = await api(again, 'POST', `/api/approvals/${question.id}`, { decision: 'allow' });
      expect(late.status).toBe(409);
      expect(((await (await api(again, 'GET', '/api/approvals')).json()) as { approvals: unknown[] }).approvals).toEqual([]);
      expect(existsSync(join(ws, 'never.txt'))).toBe(false);
    } finally {
      await again.stop();
    }
  });

  it('kill -9 just after an answer, before the agent took it: the run and its question agree (answered, not pending)', async () => {
    const { daemon, dir, ws } = await askingDaemon();
    const taskId = await started(daemon, 'WRITE_FILE unapplied.txt');
    const question = await questionOf(daemon, taskId);
    // The agent is held still, so the answer is stored and acknowledged but never taken.
    const pids = [...findMarkedProcesses(new Set([taskId])).keys()];
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    const answered = await api(daemon, 'POST', `/api/approvals/${question.id}`, { decision: 'allow' });
    expect(answered.status).toBe(200);
    expect(await daemon.stop('SIGKILL')).toBeNull();
    const again = await startDaemon(dir);
    try {
      const record = await waitRun(again, taskId);
      expect(record).toMatchObject({ status: 'interrupted', approvals: { asked: 1, allowed: 1, denied: 0, pending: [] } });
      expect(await (await api(again, 'GET', `/api/approvals/${question.id}`)).json()).toMatchObject({ status: 'allowed', answer: { by: 'caller' } });
      expect(existsSync(join(ws, 'unapplied.txt'))).toBe(false);
      expect(await noneMarked([taskId])).toBe(true);
    } finally {
      await again.stop();
    }
  });

  it('SIGTERM while a question waits: the service stops its run, which ends interrupted, and the question with it', async () => {
    const { daemon, dir } = await askingDaemon();
    const taskId = await started(daemon, 'WRITE_FILE stopped.txt');
    const question = await questionOf(daemon, taskId);
    expect(await daemon.stop('SIGTERM')).toBe(0);
    const again = await startDaemon(dir);
    try {
      expect(await waitRun(again, taskId)).toMatchObject({ status: 'interrupted', approvals: { asked: 1, pending: [] } });
      expect(await (await api(again, 'GET', `/api/approvals/${question.id}`)).json()).toMatchObject({ status: 'interrupted', answer: null });
    } finally {
      await again.stop();
    }
  });
});
