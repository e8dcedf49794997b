import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CommandAgentDefinition } from '../../src/core/index';
import { type TestHost, closeAllHosts, createTestHost } from '../helpers/harness';
import { waitFor } from '../helpers/wait';

/** docs/http-api.md, Follow-ups: a caller's message to a running run's agent, given as its next turn on the same Session. */

const dirs: string[] = [];
afterEach(async () => {
  await closeAllHosts();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Waits (bounded: a minute) until `file` exists in the run's folder. */
const waitFile = (file: string) => `i=0; while [ ! -f ${file} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`;

/** An agent whose first turn waits for `go`, and whose resumes save the prompt they were given (prompt-2.txt, …). */
const held: CommandAgentDefinition = {
  command: 'sh',
  args: ['-c', `${waitFile('go')}; echo session=s-1`],
  resumeArgs: ['-c', `n=$(ls prompt-*.txt 2>/dev/null | wc -l); printf '%s' "$1" > "prompt-$((n + 2)).txt"; echo session=s-1`, 'sh', '{prompt}'],
  sessionIdPattern: 'session=([A-Za-z0-9-]+)',
};

async function host(): Promise<TestHost> {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-follow-'));
  dirs.push(dir);
  const once: CommandAgentDefinition = { command: 'sh', args: ['-c', waitFile('go')] };
  const h = await createTestHost({ workspaces: [{ id: 'ws', path: dir }], agents: { held, once } });
  return { ...h, dir };
}

async function start(h: TestHost, body: Record<string, unknown> = {}): Promise<string> {
  const res = await h.request('POST', '/api/workspaces/ws/headless', { json: { prompt: 'work', agent: 'held', ...body } });
  expect(res.status).toBe(202);
  return ((await res.json()) as { taskId: string }).taskId;
}

const send = (h: TestHost, taskId: string, text: unknown) => h.request('POST', `/api/headless/${taskId}/messages`, { json: { text } });
const followUps = async (h: TestHost, taskId: string) =>
  ((await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json()) as { events: Array<{ type: string; data: any }> }).events
    .filter((e) => e.type === 'follow-up')
    .map((e) => e.data.state);

describe('follow-ups', () => {
  it('sent while a turn runs, they are its next turn’s prompt on the same Session, in order; the timeline shows each, not its text', async () => {
    const h = await host();
    const taskId = await start(h);
    const first = await send(h, taskId, 'Also update the changelog.');
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ taskId, pending: 1, messageId: expect.stringMatching(/^msg_/) });
    expect(await (await send(h, taskId, 'And bump the version.')).json()).toMatchObject({ pending: 2 });
    writeFileSync(join(h.dir, 'go'), '');
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded' });
    const prompt = readFileSync(join(h.dir, 'prompt-2.txt'), 'utf8');
    expect(prompt).toBe('Messages from the caller, sent while you worked, in order:\n\nAlso update the changelog.\n\nAnd bump the version.');
    expect(existsSync(join(h.dir, 'prompt-3.txt'))).toBe(false);
    expect(await followUps(h, taskId)).toEqual(['queued', 'queued', 'delivered', 'delivered']);
    const events = JSON.stringify(await (await h.request('GET', `/api/headless/${taskId}/events?format=json`)).json());
    expect(events).not.toContain('changelog');
  });

  it('one that comes after the last turn was decided is dropped, and the timeline says so', async () => {
    const h = await host();
    const check = { name: 'held', command: `echo $$ > check.pid; ${waitFile('release')}` };
    writeFileSync(join(h.dir, 'go'), '');
    const taskId = await start(h, { verify: { checks: [check] } });
    await waitFor(() => existsSync(join(h.dir, 'check.pid')), { what: 'the check to run' });
    expect((await send(h, taskId, 'too late')).status).toBe(202);
    writeFileSync(join(h.dir, 'release'), '');
    expect(await h.waitEnded(taskId)).toMatchObject({ status: 'succeeded', verify: { verdict: 'passed' } });
    expect(await followUps(h, taskId)).toEqual(['queued', 'dropped']);
  });

  it('are refused clearly: an ended or unknown run, an agent that cannot go on, a blank text', async () => {
    const h = await host();
    writeFileSync(join(h.dir, 'go'), '');
    const ended = await start(h);
    await h.waitEnded(ended);
    expect(await (await send(h, ended, 'x')).json()).toMatchObject({ status: 409, code: 'run_not_running' });
    expect(await (await send(h, 'run_nope', 'x')).json()).toMatchObject({ status: 404, code: 'run_not_found' });
    expect(await (await send(h, ended, '  ')).json()).toMatchObject({ status: 400, code: 'prompt_required' });
    rmSync(join(h.dir, 'go'));
    const once = await start(h, { agent: 'once' });
    const refused = await send(h, once, 'x');
    expect(await refused.json()).toMatchObject({ status: 409, code: 'run_cannot_continue' });
    writeFileSync(join(h.dir, 'go'), '');
    await h.waitEnded(once);
  });
});
