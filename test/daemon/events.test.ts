import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { BUILTIN_AGENTS } from '../../src/core/agents/builtins';
import { type AgentAdapter, createMemoryKeyv, createSqliteKeyv } from '../../src/core/index';
import { RunEvents } from '../../src/core/events/run-events';
import { type StoredHead, headKey } from '../../src/core/events/timeline-store';
import { keyvStore } from '../../src/core/store/keyv-store';
import type { RunRecord } from '../../src/contract/records';
import { api, cleanupDaemons, startDaemon, startFakeDaemon, waitRun } from '../helpers/daemon';
import { parseSse, readToEnd, sseEvents } from '../helpers/events';
import { FAKE_AGENT, type TestHost, closeAllHosts, createTestHost, problem } from '../helpers/harness';
import { sleep, waitFor } from '../helpers/wait';

const dirs: string[] = [];
afterEach(closeAllHosts);
afterAll(() => cleanupDaemons(dirs));

/** The fake agent read with Claude Code's parser: its `echo` steps print Claude-style events. */
const claudish: AgentAdapter = {
  name: 'claudish',
  kind: 'agent',
  command: process.execPath,
  supportsResume: false,
  invocation: (input) => ({ command: process.execPath, args: [FAKE_AGENT, input.prompt] }),
  parser: BUILTIN_AGENTS.find((a) => a.name === 'claude')!.parser,
};

const line = (event: unknown) => `echo ${JSON.stringify(event)}`;
const init = line({ type: 'system', subtype: 'init', session_id: 'sess-1' });
const say = (text: string) => line({ type: 'assistant', message: { content: [{ type: 'text', text }] } });
const toolUse = line({ type: 'assistant', message: { content: [{ type: 'tool_use', id: 'tu1', name: 'Bash', input: { command: 'ls' } }] } });
const toolResult = line({ type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 'tu1', content: 'a.txt' }] } });
const result = line({ type: 'result', subtype: 'success', result: 'done', usage: { input_tokens: 12, output_tokens: 7 }, total_cost_usd: 0.001 });

async function host(options: Parameters<typeof createTestHost>[0] = {}): Promise<TestHost> {
  return createTestHost({ workspaces: [{ id: 'ws', path: tmpdir() }], agents: { claudish }, ...options });
}

async function start(h: TestHost, prompt: string): Promise<string> {
  return (await h.start(prompt, { agent: 'claudish' })).taskId;
}

const page = async (h: TestHost, taskId: string, query = '') =>
  (await (await h.request('GET', `/api/headless/${taskId}/events?format=json${query}`)).json()) as {
    taskId: string;
    events: Array<{ seq: number; time: string; type: string; data: Record<string, unknown> }>;
    ended: boolean;
    nextAfter: number | null;
  };

describe('run events', () => {
  it('a timeline normalised from the agent output: started, session, message, tool, usage, ended', async () => {
    const h = await host();
    const taskId = await start(h, [init, toolUse, toolResult, say('All done.'), result].join(';'));
    await h.waitEnded(taskId);
    const { events, ended, nextAfter } = await page(h, taskId);
    expect(ended).toBe(true);
    expect(nextAfter).toBeNull();
    expect(events.map((e) => e.type)).toEqual(['run.started', 'agent.session', 'tool', 'tool', 'message', 'usage', 'run.ended']);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const e of events) expect(Date.parse(e.time)).not.toBeNaN();
    expect(events[0]!.data).toMatchObject({ taskId, agent: 'claudish', workspaceId: 'ws', mode: 'async' });
    expect(events[1]!.data).toEqual({ resumeId: expect.any(String) });
    // The tool's name and how it ended, never its input.
    expect(events[2]!.data).toEqual({ name: 'Bash', status: 'started', id: 'tu1' });
    expect(events[3]!.data).toEqual({ name: 'Bash', status: 'succeeded', id: 'tu1' });
    expect(events[4]!.data).toEqual({ text: 'All done.' });
    expect(events[5]!.data).toEqual({ inputTokens: 12, outputTokens: 7, costUsd: 0.001 });
    expect(events[6]!.data).toMatchObject({ taskId, status: 'succeeded', usage: { inputTokens: 12 }, lastMessage: 'done' });
  });

  it('an agent error and a failed result become error events', async () => {
    const h = await host();
    const failed = line({ type: 'result', subtype: 'error_during_execution', is_error: true, errors: ['boom'] });
    const taskId = await start(h, [init, failed, 'exit 1'].join(';'));
    await h.waitEnded(taskId);
    const { events } = await page(h, taskId);
    expect(events.filter((e) => e.type === 'error').map((e) => e.data)).toEqual([{ message: 'boom' }]);
    expect(events.at(-1)).toMatchObject({ type: 'run.ended', data: { status: 'failed' } });
  });

  it('SSE streams live while the run runs, then ends the stream with run.ended', async () => {
    const h = await host();
    const taskId = await start(h, [init, say('first'), 'sleep 600', say('second'), result].join(';'));
    const res = await h.request('GET', `/api/headless/${taskId}/events`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    let statusAtFirst: unknown;
    const text = await readToEnd(res, 10_000, (chunk) => {
      if (statusAtFirst === undefined && chunk.includes('"text":"first"')) {
        statusAtFirst = h.request('GET', `/api/headless/${taskId}`).then(async (r) => ((await r.json()) as { status: string }).status);
      }
    });
    // The first message arrived while the run was still running.
    expect(await statusAtFirst).toBe('running');
    const frames = sseEvents(text);
    expect(frames.map((f) => f.event)).toEqual(['run.started', 'agent.session', 'message', 'message', 'usage', 'run.ended']);
    expect(frames.map((f) => f.id)).toEqual(['1', '2', '3', '4', '5', '6']);
    expect(frames.every((f) => f.parsed.type === f.event && String(f.parsed.seq) === f.id)).toBe(true);
    expect(text.startsWith('retry: 2000\n\n')).toBe(true);
  });

  it('replays after Last-Event-ID (which wins over ?after=), or after ?after=', async () => {
    const h = await host();
    const taskId = await start(h, [init, say('a'), say('b'), say('c'), result].join(';'));
    await h.waitEnded(taskId);
    const seqs = async (query: string, headers: Record<string, string> = {}) =>
      sseEvents(await readToEnd(await h.request('GET', `/api/headless/${taskId}/events${query}`, { headers }))).map((f) => f.parsed.seq);
    expect(await seqs('')).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(await seqs('?after=4')).toEqual([5, 6, 7]);
    expect(await seqs('?after=1', { 'last-event-id': '5' })).toEqual([6, 7]);
    expect(await seqs('?after=7')).toEqual([]);
    expect(await seqs('?after=99')).toEqual([]);
  });

  it('the same events as JSON lines with Accept: application/x-ndjson', async () => {
    const h = await host();
    const taskId = await start(h, [init, say('hi'), result].join(';'));
    await h.waitEnded(taskId);
    const res = await h.request('GET', `/api/headless/${taskId}/events`, { headers: { accept: 'application/x-ndjson' } });
    expect(res.headers.get('content-type')).toBe('application/x-ndjson; charset=utf-8');
    const lines = (await readToEnd(res))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { seq: number; type: string });
    expect(lines.map((l) => l.type)).toEqual(['run.started', 'agent.session', 'message', 'usage', 'run.ended']);
    expect(lines.map((l) => l.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('pages with ?format=json&after=&limit=', async () => {
    const h = await host();
    const taskId = await start(h, [init, say('a'), say('b'), say('c'), result].join(';'));
    await h.waitEnded(taskId);
    const first = await page(h, taskId, '&limit=3');
    expect(first.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(first).toMatchObject({ taskId, ended: false, nextAfter: 3 });
    const second = await page(h, taskId, `&after=${first.nextAfter}&limit=3`);
    expect(second.events.map((e) => e.seq)).toEqual([4, 5, 6]);
    const last = await page(h, taskId, `&after=${second.nextAfter}&limit=3`);
    expect(last).toMatchObject({ ended: true, nextAfter: null });
    expect(last.events.map((e) => e.seq)).toEqual([7]);
  });

  it('sends keep-alive comments while nothing happens', async () => {
    const h = await host({ heartbeatMs: 50 });
    const taskId = await start(h, [init, 'sleep 500', result].join(';'));
    const text = await readToEnd(await h.request('GET', `/api/headless/${taskId}/events`));
    expect(parseSse(text).frames.filter((f) => f.comment === 'keep-alive').length).toBeGreaterThanOrEqual(2);
    expect(sseEvents(text).at(-1)!.event).toBe('run.ended');
  });

  it('keeps the last 1000 events of a run, and the final one always', async () => {
    const h = await host();
    const taskId = await start(h, 'messages 1500 10');
    await h.waitEnded(taskId);
    const all = [];
    let after = 0;
    for (let i = 0; i < 20; i++) {
      const p = await page(h, taskId, `&after=${after}&limit=1000`);
      all.push(...p.events);
      if (p.nextAfter === null) break;
      after = p.nextAfter;
    }
    // run.started + 1500 messages + run.ended = 1502 events; the first 502 were dropped.
    expect(all.length).toBe(1000);
    expect(all[0]!.seq).toBe(503);
    expect(all.at(-1)).toMatchObject({ seq: 1502, type: 'run.ended' });
  });

  it('stores the kept events in segments: the same events after a restart, old segments deleted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hrw-events-'));
    try {
      const first = await host({ store: await createSqliteKeyv(dir) });
      const taskId = await start(first, 'messages 1500 10');
      await first.waitEnded(taskId);
      const before = await page(first, taskId, '&limit=1000');
      await first.close();
      const keyv = await createSqliteKeyv(dir);
      const rows = ((await keyvStore(keyv).database?.query<{ key: string }>("SELECT key FROM headless_kv WHERE key LIKE 'events:%'")) ?? []).map((r) => r.key);
      // Events 503 to 1502 are kept: segments 5 to 15 (of 100 each), and the head.
      expect(rows.sort()).toEqual([`events:${taskId}`, ...Array.from({ length: 11 }, (_, i) => `events:${taskId}:${i + 5}`)].sort());
      const second = await host({ store: keyv });
      const after = await page(second, taskId, '&limit=1000');
      expect(after.events).toEqual(before.events);
      expect(after.events[0]!.seq).toBe(503);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps at most 1 MiB of events per run; each message is cut at 4000 characters', async () => {
    const h = await host();
    const taskId = await start(h, 'messages 400 6000');
    await h.waitEnded(taskId);
    const p = await page(h, taskId, '&limit=1000');
    const bytes = p.events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);
    expect(bytes).toBeLessThanOrEqual(1_048_576);
    expect(p.events.length).toBeGreaterThan(200);
    expect(p.events.length).toBeLessThan(400);
    expect(String(p.events[0]!.data.text).length).toBe(4000);
  });

  it('a reader that reads nothing never holds the run back; it later gets the rest and the end', async () => {
    const h = await host();
    const taskId = await start(h, ['messages 50 100', 'sleep 300', 'messages 3000 200'].join(';'));
    const res = await h.request('GET', `/api/headless/${taskId}/events`);
    const reader = res.body!.getReader();
    await reader.read();
    // Not reading: the run still ends on its own.
    await h.waitEnded(taskId, 20_000);
    const frames = sseEvents(await readToEnd(reader));
    const seqs = frames.map((f) => f.parsed.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(frames.at(-1)!.event).toBe('run.ended');
    expect(frames.at(-1)!.parsed.seq).toBe(3052);
  });

  it('a stream closed by its client is let go, and the service stays well', async () => {
    const h = await host();
    const taskId = await start(h, [init, 'sleep 400', result].join(';'));
    const res = await h.request('GET', `/api/headless/${taskId}/events`);
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    const ended = await h.waitEnded(taskId);
    expect(ended.status).toBe('succeeded');
  });

  it.each([
    ['?after=-1', {}],
    ['?after=abc', {}],
    ['?after=1.5', {}],
    ['?format=xml', {}],
    ['?limit=0', {}],
    ['?limit=1001', {}],
    ['?x=1', {}],
    ['', { 'last-event-id': 'abc' }],
    ['', { 'last-event-id': '-2' }],
  ])('%s %j is 400 invalid_body', async (query, headers) => {
    const h = await host();
    const taskId = await start(h, 'echo x');
    expect(await problem(await h.request('GET', `/api/headless/${taskId}/events${query}`, { headers }))).toMatchObject({ status: 400, code: 'invalid_body' });
  });

  it('an unknown run is 404 run_not_found', async () => {
    const h = await host();
    expect(await problem(await h.request('GET', '/api/headless/run_nope/events'))).toMatchObject({ status: 404, code: 'run_not_found' });
  });
});

describe('followers of a busy run', () => {
  it('many (more than 8) are handed new events together, at most every 100 ms: followers in step read the same batches', async () => {
    const events = new RunEvents({ store: keyvStore(createMemoryKeyv()), log: () => undefined });
    events.open({ taskId: 'run_1', resumeId: 'ses_1', workspaceId: 'ws', agent: 'fake', mode: 'async' });
    const follow = async () => {
      const reader = events.reader({ taskId: 'run_1', status: 'running' } as RunRecord, 0);
      const batches: number[][] = [];
      for (let i = 0; i < 1000; i++) {
        const page = await reader.next(5000);
        if (page.events.length > 0) batches.push(page.events.map((e) => e.seq));
        if (page.ended) return batches;
      }
      throw new Error('the reader never ended');
    };
    const started = Date.now();
    const followers = Array.from({ length: 10 }, follow);
    for (let i = 0; i < 100; i++) {
      events.append('run_1', 'message', { text: `m${i}` });
      await sleep(5);
    }
    await events.end({ taskId: 'run_1' } as RunRecord);
    const elapsed = Date.now() - started;
    const [a, ...others] = await Promise.all(followers);
    expect(a!.flat()).toEqual(Array.from({ length: 102 }, (_, i) => i + 1));
    for (const b of others) expect(b).toEqual(a);
    // One hand-over per interval at most (the end is told at once), never one per event.
    expect(a!.length).toBeLessThanOrEqual(Math.ceil(elapsed / 100) + 2);
  });

  it('a few are handed each event at once; many get the events that follow the last hand-over only when the interval is over', async () => {
    const events = new RunEvents({ store: keyvStore(createMemoryKeyv()), log: () => undefined });
    const seen = async (followers: number) => {
      const taskId = `run_${followers}`;
      events.open({ taskId, resumeId: 'ses_1', workspaceId: 'ws', agent: 'fake', mode: 'async' });
      const readers = Array.from({ length: followers }, () => events.reader({ taskId, status: 'running' } as RunRecord, 0));
      // Two events in the tick after run.started was handed over.
      events.append(taskId, 'message', { text: 'one' });
      events.append(taskId, 'message', { text: 'two' });
      const page = await readers[0]!.next(0);
      for (const r of readers) r.close();
      return page.events.map((e) => e.seq);
    };
    expect(await seen(1)).toEqual([1, 2, 3]);
    expect(await seen(9)).toEqual([1]);
  });
});

describe('run events through the daemon', () => {
  it('stream over HTTP, and survive a restart', async () => {
    const d = await startFakeDaemon(dirs);
    const started = (await (await api(d, 'POST', '/api/workspaces/ws/headless', { prompt: 'session s1; sleep 300; echo bye', agent: 'fake' })).json()) as {
      taskId: string;
    };
    const res = await fetch(`${d.url}/api/headless/${started.taskId}/events`, { headers: { host: `127.0.0.1:${d.port}` } });
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const live = sseEvents(await readToEnd(res)).map((f) => f.event);
    expect(live).toEqual(['run.started', 'agent.session', 'run.ended']);
    expect(await d.stop()).toBe(0);
    const again = await startDaemon(d.dir);
    const body = (await (await api(again, 'GET', `/api/headless/${started.taskId}/events?format=json`)).json()) as { events: Array<{ type: string }> };
    expect(body.events.map((e) => e.type)).toEqual(live);
    await again.stop();
  });

  it('a run cut short by a crash ends its stored timeline with run.ended (interrupted) at the next start', async () => {
    const d = await startFakeDaemon(dirs);
    const { taskId } = (await (await api(d, 'POST', '/api/workspaces/ws/headless', { prompt: 'session s2; sleep 30000', agent: 'fake' })).json()) as {
      taskId: string;
    };
    // The timeline is written within a second of each event: the kill comes once the agent's
    // session event is stored, read from the daemon's own file, however slow the machine.
    const stored = keyvStore(await createSqliteKeyv(join(d.dir, '.headless')));
    await waitFor(async () => ((await stored.get<StoredHead>(headKey(taskId)))?.last ?? 0) >= 2, { what: 'the agent.session event to be stored' });
    await stored.close();
    expect(await d.stop('SIGKILL')).toBeNull();
    const again = await startDaemon(d.dir);
    const body = (await (await api(again, 'GET', `/api/headless/${taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: { status?: string } }>;
    };
    expect(body.events.map((e) => e.type)).toEqual(['run.started', 'agent.session', 'run.ended']);
    expect(body.events.at(-1)!.data.status).toBe('interrupted');
    await waitRun(again, taskId);
    await again.stop();
  });

  it('a client that drops an SSE connection mid-run does not disturb the daemon', async () => {
    const d = await startFakeDaemon(dirs);
    const { taskId } = (await (await api(d, 'POST', '/api/workspaces/ws/headless', { prompt: 'sleep 500; echo x', agent: 'fake' })).json()) as {
      taskId: string;
    };
    const controller = new AbortController();
    const res = await fetch(`${d.url}/api/headless/${taskId}/events`, { headers: { host: `127.0.0.1:${d.port}` }, signal: controller.signal });
    await res.body!.getReader().read();
    controller.abort();
    await waitFor(async () => ((await (await api(d, 'GET', `/api/headless/${taskId}`)).json()) as { status: string }).status === 'succeeded', {
      what: 'the run to end',
    });
    await d.stop();
  });
});
