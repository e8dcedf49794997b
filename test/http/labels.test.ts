import { afterEach, describe, expect, it } from 'vitest';
import { closeAllHosts, createTestHost, problem } from '../helpers/harness';

/** docs/http-api.md: a run's title and metadata, given at start, shown everywhere, filtered by. */

afterEach(closeAllHosts);

const START = '/api/workspaces/ws/headless';

describe('title and metadata', () => {
  it('are in the record, the list and the run.started event; absent when not given', async () => {
    const host = await createTestHost();
    const labelled = await host.start('echo hi', { title: 'Nightly: fix flaky tests', metadata: { team: 'infra', 'alert.id': 'A-17' } });
    const plain = await host.start('echo hi');
    const record = await host.waitEnded(labelled.taskId);
    expect(record).toMatchObject({ title: 'Nightly: fix flaky tests', metadata: { team: 'infra', 'alert.id': 'A-17' } });
    expect(await host.waitEnded(plain.taskId)).not.toHaveProperty('title');
    const listed = (await (await host.request('GET', '/api/headless?wsId=ws')).json()) as { runs: Array<Record<string, unknown>> };
    expect(listed.runs.find((r) => r.taskId === labelled.taskId)).toMatchObject({ title: 'Nightly: fix flaky tests' });
    const page = (await (await host.request('GET', `/api/headless/${labelled.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: Record<string, unknown> }>;
    };
    expect(page.events[0]).toMatchObject({ type: 'run.started', data: { title: 'Nightly: fix flaky tests', metadata: { team: 'infra' } } });
  });

  it('the list filters by one metadata pair, paging with a cursor through runs that do not match', async () => {
    const host = await createTestHost();
    const tagged: string[] = [];
    for (let i = 0; i < 7; i++) {
      const run = await host.start('echo hi', i % 3 === 0 ? { metadata: { team: 'infra' } } : { metadata: { team: 'web' } });
      if (i % 3 === 0) tagged.push(run.taskId);
      await host.waitEnded(run.taskId);
    }
    const seen: string[] = [];
    let cursor = '';
    for (let pages = 0; pages < 10; pages++) {
      const res = await host.request('GET', `/api/headless?wsId=ws&metadata=team:infra&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      const page = (await res.json()) as { runs: Array<{ taskId: string; metadata: Record<string, string> }>; nextCursor: string | null };
      for (const run of page.runs) expect(run.metadata.team).toBe('infra');
      seen.push(...page.runs.map((r) => r.taskId));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    expect(seen).toEqual([...tagged].reverse());
    const none = (await (await host.request('GET', '/api/headless?wsId=ws&metadata=team:nobody')).json()) as { runs: unknown[]; nextCursor: null };
    expect(none).toEqual({ runs: [], nextCursor: null });
  });

  it('the list filters by agent', async () => {
    const host = await createTestHost();
    const fake = await host.start('echo hi');
    await host.waitEnded(fake.taskId);
    const ids = async (agent: string) =>
      ((await (await host.request('GET', `/api/headless?wsId=ws&agent=${agent}`)).json()) as { runs: Array<{ taskId: string }> }).runs.map((r) => r.taskId);
    expect(await ids('fake')).toEqual([fake.taskId]);
    expect(await ids('claude')).toEqual([]);
    expect((await host.request('GET', '/api/headless?wsId=ws&agent=../x')).status).toBe(400);
  });

  it('bad ones are 400 invalid_body and start nothing', async () => {
    const host = await createTestHost();
    const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
    for (const body of [
      { title: '' },
      { title: '   ' },
      { title: 't'.repeat(201) },
      { title: 5 },
      { metadata: many },
      { metadata: { 'bad key': 'v' } },
      { metadata: { '-lead': 'v' } },
      { metadata: { k: 'v'.repeat(257) } },
      { metadata: { k: 5 } },
      { metadata: ['k'] },
    ]) {
      const res = await host.request('POST', START, { json: { prompt: 'echo x', agent: 'fake', ...body } });
      expect(await problem(res), JSON.stringify(body)).toMatchObject({ status: 400, code: 'invalid_body' });
    }
    for (const filter of ['team', ':v', 'bad key:v', `k:${'v'.repeat(257)}`]) {
      expect((await host.request('GET', `/api/headless?wsId=ws&metadata=${encodeURIComponent(filter)}`)).status, filter).toBe(400);
    }
    expect(host.spawner.count).toBe(0);
    // At the bounds: accepted.
    const max = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v'.repeat(256)]));
    expect((await host.request('POST', START, { json: { prompt: 'echo x', agent: 'fake', title: 't'.repeat(200), metadata: max } })).status).toBe(202);
  });
});
