import { type ChildProcess, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { processStartTime } from '../../src/core/process/process-tree';
import { MACHINE } from '../../src/core/process/machine';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { asHeadlessStore } from '../../src/core/store/keyv-store';
import { Approvals } from '../../src/core/approvals/approvals';
import { createFleet } from '../../src/core/fleet/index';
import type { StoredRun } from '../../src/core/types';
import { storedRun } from '../helpers/records';
import { closeAllHosts, createTestHost, memoryLogger } from '../helpers/harness';
import { isDead } from '../helpers/processes';
import { createNodeServer } from '../../src/adapters/node';
import { startReceiver } from '../helpers/receiver';
import { waitFor } from '../helpers/wait';

afterEach(closeAllHosts);
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A process standing in for something unrelated (or for an orphaned agent), in its own group. */
function sleeper(): Promise<ChildProcess> {
  return new Promise((done) => {
    const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    children.push(child);
    child.once('spawn', () => done(child));
  });
}

/** An unrelated process that answers SIGUSR2 on its stdout; resolved once it listens for it. */
function answerer(): Promise<ChildProcess> {
  const script = "process.on('SIGUSR2', () => console.log('alive')); console.log('ready'); setInterval(() => {}, 60000)";
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['-e', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(child);
    child.stdout?.once('data', () => done(child));
    child.once('error', fail);
  });
}

/**
 * Whether `child` answers a SIGUSR2 sent now. A SIGKILL is final once it is sent, so one sent
 * before this (by the reaper) means no answer, only its exit.
 */
function answers(child: ChildProcess): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(false);
  return new Promise((done, fail) => {
    child.stdout?.on('data', (c: Buffer) => c.toString().includes('alive') && done(true));
    child.once('exit', () => done(false));
    setTimeout(() => fail(new Error('neither an answer nor an exit in 60 s')), 60_000).unref();
    child.kill('SIGUSR2');
  });
}

function orphanRecord(taskId: string, pid: number, startTime: string | undefined): StoredRun {
  const createdAt = new Date(Date.now() - 60_000).toISOString();
  return storedRun(taskId, { createdAt, timeoutMs: 300_000, process: { pid, startTime, machine: MACHINE }, bootId: 'boot_earlier' });
}

describe('crash recovery reaper', () => {
  it('never signals a pid that now belongs to an unrelated process (start time differs)', async () => {
    const unrelated = await answerer();
    const store = createMemoryKeyv();
    await store.set('run:run_reused', orphanRecord('run_reused', unrelated.pid!, '1'));
    const host = await createTestHost({ store });
    // Interrupted once it was reaped: whatever the reaper sent was sent before the answer's signal.
    expect(await (await host.request('GET', '/api/headless/run_reused')).json()).toMatchObject({ status: 'interrupted', error: { code: 'interrupted' } });
    expect(await answers(unrelated)).toBe(true);
  });

  it('kills the recorded process group when it is provably the same process', async () => {
    const orphan = await sleeper();
    const store = createMemoryKeyv();
    await store.set('run:run_same', orphanRecord('run_same', orphan.pid!, processStartTime(orphan.pid!)));
    const host = await createTestHost({ store });
    expect(await (await host.request('GET', '/api/headless/run_same')).json()).toMatchObject({ status: 'interrupted' });
    expect(await isDead(orphan.pid!)).toBe(true);
  });

  it('frees the Session of an interrupted run, and is idempotent', async () => {
    const store = createMemoryKeyv();
    await store.set('run:run_x', orphanRecord('run_x', 999_999_999, undefined));
    await store.set('session:ses_run_x', {
      resumeId: 'ses_run_x',
      workspaceId: 'ws',
      agent: 'fake',
      agentSessionId: 'abc',
      retired: false,
      createdAt: new Date().toISOString(),
      lastRunAt: new Date().toISOString(),
      runCount: 1,
    });
    const first = await createTestHost({ store });
    const record = await (await first.request('GET', '/api/headless/run_x')).text();
    expect(await (await first.request('GET', '/api/sessions/ses_run_x')).json()).toMatchObject({ status: 'idle', resumable: true });
    const second = await createTestHost({ store });
    expect(await (await second.request('GET', '/api/headless/run_x')).text()).toBe(record);
  });
});

describe('a question answered as its instance died', () => {
  it('the interrupted run counts the answer its question holds: the two records agree, nothing left pending', async () => {
    const keyv = createMemoryKeyv();
    const store = asHeadlessStore(keyv);
    const log = () => undefined;
    // The gone instance stored the question and its caller's answer, and died before it noted the answer on the run.
    const gone = new Approvals({ store, fleet: createFleet(store, { log }), instanceId: 'boot_earlier', log });
    await gone.load();
    const run = { taskId: 'run_asked', resumeId: 'ses_run_asked', workspaceId: 'ws', agent: 'fake' };
    const question = await gone.open(run, { title: 'Write a file', kind: 'edit', paths: [], canAlways: false }, { timeoutMs: 600_000, fallback: 'deny' });
    expect(await gone.answer(question.id, { decision: 'allow', scope: 'once' })).toMatchObject({ status: 'allowed' });
    const pendingOne = { asked: 1, allowed: 0, denied: 0, timedOut: 0, pending: [question.id] };
    await keyv.set('run:run_asked', { ...orphanRecord('run_asked', 999_999_999, undefined), approvals: pendingOne });
    const host = await createTestHost({ store: keyv });
    const record = await (await host.request('GET', '/api/headless/run_asked')).json();
    expect(record).toMatchObject({ status: 'interrupted', approvals: { asked: 1, allowed: 1, denied: 0, pending: [] } });
    expect(await (await host.request('GET', `/api/approvals/${question.id}`)).json()).toMatchObject({ status: 'allowed' });
  });
});

describe("the dispatcher's take-over (claimEnded)", () => {
  it("delivers what a gone boot's ended run owes, as the new owner, and records it delivered", async () => {
    const receiver = await startReceiver();
    const endedAt = new Date(Date.now() - 30_000).toISOString();
    const owed = { target: 0, event: 'run.ended', at: endedAt, state: 'pending', attempts: 0, nextAttemptAt: Date.parse(endedAt) } as const;
    const store = createMemoryKeyv();
    const ended = orphanRecord('run_owed', 999_999_999, undefined);
    await store.set('run:run_owed', {
      ...ended,
      status: 'succeeded',
      endedAt,
      exitCode: 0,
      webhookTargets: [{ url: receiver.url, events: ['run.ended'], source: 'start' }],
      deliveries: [owed],
      deliveryDueAt: owed.nextAttemptAt,
    });
    const host = await createTestHost({ store, webhooks: { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', allowPrivateTargets: true } });
    await waitFor(async () => ((await store.get('run:run_owed')) as StoredRun).deliveries?.[0]?.state === 'delivered', { what: 'the delivery recorded' });
    const stored = (await store.get('run:run_owed')) as StoredRun;
    expect(stored.bootId).not.toBe('boot_earlier');
    expect(stored).toMatchObject({ status: 'succeeded', endedAt });
    expect(stored.deliveryDueAt).toBeUndefined();
    expect(receiver.received.map((r) => JSON.parse(r.body).data)).toEqual([expect.objectContaining({ taskId: 'run_owed', status: 'succeeded' })]);
    expect(await (await host.request('GET', '/api/headless/run_owed')).json()).toMatchObject({ status: 'succeeded' });
  });
});

describe('every way a run ends is told alike', () => {
  it('a run crash recovery interrupts is logged as ended and counted in headless_runs_ended_total, like any other', async () => {
    const store = createMemoryKeyv();
    await store.set('run:run_orphaned', orphanRecord('run_orphaned', 999_999_999, undefined));
    const { lines, logger } = memoryLogger();
    const host = await createTestHost({ store, logger });
    expect(await (await host.request('GET', '/api/headless/run_orphaned')).json()).toMatchObject({ status: 'interrupted' });
    const ended = lines.filter((l) => l.message === 'run ended');
    expect(ended.map((l) => l.fields)).toEqual([expect.objectContaining({ taskId: 'run_orphaned', status: 'interrupted', error: 'interrupted' })]);
    const metrics = await (await host.request('GET', '/metrics')).text();
    expect(metrics).toMatch(/^headless_runs_ended_total\{agent="fake",workspace="ws",status="interrupted"\} 1$/m);
    const events = (await (await host.request('GET', '/api/headless/run_orphaned/events?format=json')).json()) as { events: Array<{ type: string }> };
    expect(events.events.at(-1)?.type).toBe('run.ended');
  });
});

describe('slow bodies', () => {
  it('a body over 256 KiB sent slowly in chunks is answered 413 without reading the rest', async () => {
    const host = await createTestHost();
    const server = createNodeServer(host.handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as import('node:net').AddressInfo).port;
    const answer = await new Promise<{ text: string; sentKb: number }>((done, fail) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      let sentKb = 0;
      let stop = false;
      socket.on('data', (c) => {
        text += c.toString();
        stop = true;
      });
      socket.on('error', () => undefined);
      socket.on('close', () => done({ text, sentKb }));
      socket.once('connect', async () => {
        socket.write('POST /api/workspaces/ws/headless HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
        const chunk = 'x'.repeat(32 * 1024);
        for (let i = 0; i < 64 && !stop; i++) {
          socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
          sentKb += 32;
          await new Promise((r) => setTimeout(r, 20));
        }
        socket.end();
      });
      setTimeout(() => fail(new Error('no answer')), 20_000);
    });
    server.closeAllConnections();
    server.close();
    expect(answer.text).toMatch(/^HTTP\/1\.1 413/);
    expect(answer.text).toContain('"code":"body_too_large"');
    // Answered once the limit was passed, long before the 2 MiB the client meant to send.
    expect(answer.sentKb).toBeLessThan(1024);
  });
});
