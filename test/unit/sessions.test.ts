import { describe, expect, it } from 'vitest';
import { createFleet } from '../../src/core/fleet/index';
import { SessionBook } from '../../src/core/sessions';
import { createMemoryKeyv } from '../../src/core/store/keyvs';
import { keyvStore } from '../../src/core/store/keyv-store';
import type { SessionState } from '../../src/core/types';

const bookOn = (store: ReturnType<typeof keyvStore>) =>
  new SessionBook(
    store,
    createFleet(store, { log: () => undefined }),
    () => true,
    () => undefined,
  );

const session = (resumeId: string): SessionState => ({
  resumeId,
  workspaceId: 'ws',
  agent: 'fake',
  retired: false,
  createdAt: '2026-01-01T00:00:00.000Z',
  lastRunAt: '2026-01-01T00:00:00.000Z',
  runCount: 1,
});

describe('SessionBook', () => {
  it('concurrent updates of one Session all land, each on the latest state', async () => {
    const store = keyvStore(createMemoryKeyv());
    const book = bookOn(store);
    await book.create(session('s1'));
    await Promise.all([
      book.update('s1', () => ({ retired: true })),
      book.update('s1', () => ({ agentSessionId: 'agent-1' })),
      book.update('s1', (s) => ({ runCount: s.runCount + 1 })),
      book.update('s1', (s) => ({ runCount: s.runCount + 1 })),
    ]);
    const fresh = bookOn(store);
    expect(await fresh.get('s1')).toMatchObject({ retired: true, agentSessionId: 'agent-1', runCount: 3 });
  });

  it('a refused write leaves the stored state and later updates still apply', async () => {
    const store = keyvStore(createMemoryKeyv());
    const book = bookOn(store);
    await book.create(session('s2'));
    await expect(
      book.update('s2', () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await book.update('s2', (s) => ({ runCount: s.runCount + 1 }))).runCount).toBe(2);
  });

  it('reads Sessions beyond its cache from the store', async () => {
    const store = keyvStore(createMemoryKeyv());
    const book = bookOn(store);
    for (let i = 0; i < 5100; i++) await book.create(session(`s${i}`));
    expect(await book.get('s0')).toMatchObject({ resumeId: 's0' });
    await expect(book.require('nope')).rejects.toMatchObject({ code: 'session_not_found' });
  });

  it('busy is taken by one run at a time and released only by the run that holds it', async () => {
    const book = bookOn(keyvStore(createMemoryKeyv()));
    await book.create(session('s'));
    const status = async () => (await book.view(await book.require('s'))).status;
    expect(await book.take('s', 'run_a')).toBe(true);
    expect(await book.take('s', 'run_c')).toBe(false);
    await book.release('s', 'run_b');
    expect(await status()).toBe('busy');
    await book.release('s', 'run_a');
    expect(await status()).toBe('idle');
    expect(await book.take('s', 'run_c')).toBe(true);
  });
});
