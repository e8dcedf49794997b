import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterAll, afterEach, expect, it, vi } from 'vitest';
import { type ApprovalRecord, createSqliteKeyv } from '../../src/core/index';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/**
 * Retention of the questions of runs under `permissions: "ask"` (docs/approvals.md), in a file of
 * its own: ids sort by creation time and never go backwards within a process, so the clock can be
 * set 40 days back only before any id is made.
 */
const FAKE_BIN = resolve(__dirname, '../fixtures/bin');
const DAY = 24 * 60 * 60 * 1000;
const dir = mkdtempSync(join(tmpdir(), 'hrw-ask-retention-'));
afterEach(closeAllHosts);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function host(): Promise<TestHost> {
  const env = { PATH: `${FAKE_BIN}${delimiter}${process.env.PATH}`, GEMINI_API_KEY: 'fake-key' };
  return createTestHost({
    store: await createSqliteKeyv(join(dir, 'data')),
    workspaces: [{ id: 'ws', path: dir, agents: ['gemini-acp'], run: { permissions: 'ask', approvals: { timeoutMs: 300 } }, env }],
  });
}

async function askedAndEnded(h: TestHost, file: string): Promise<ApprovalRecord> {
  const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { agent: 'gemini-acp', prompt: `WRITE_FILE ${file}` } });
  const { taskId } = (await res.json()) as { taskId: string };
  await h.waitEnded(taskId);
  const [question] = ((await (await h.request('GET', `/api/approvals?taskId=${taskId}`)).json()) as { approvals: ApprovalRecord[] }).approvals;
  return question!;
}

it('retention deletes questions older than retentionDays with their runs, and keeps the recent ones', async () => {
  vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 40 * DAY });
  const past = await host();
  const old = await askedAndEnded(past, 'old.txt');
  expect(old).toMatchObject({ status: 'denied', answer: { by: 'fallback' } });
  await past.close();
  vi.useRealTimers();
  const today = await host();
  await waitFor(async () => (await today.request('GET', `/api/approvals/${old.id}`)).status === 404, { what: 'the old question to be pruned' });
  const recent = await askedAndEnded(today, 'recent.txt');
  const left = ((await (await today.request('GET', '/api/approvals?workspace=ws')).json()) as { approvals: ApprovalRecord[] }).approvals;
  expect(left.map((a) => a.id)).toEqual([recent.id]);
});
