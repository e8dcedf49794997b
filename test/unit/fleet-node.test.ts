import { describe, expect, it } from 'vitest';
import { FLEET_NODE, createFleet } from '../../src/core/fleet/index';
import type { HeadlessStore } from '../../src/core/store/headless-store';

/** A fleet's queue engine (pg-boss) needs Node 22.12: on an older Node a PostgreSQL store is refused, saying so (docs/decisions.md). */

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
const older = major < 22 || (major === 22 && minor < 12);
const postgresStore = { database: { dialect: 'postgres', connectionString: 'postgres://u@127.0.0.1:1/db' } } as unknown as HeadlessStore;

describe('the Node a fleet needs', () => {
  it.runIf(older)('on this Node a PostgreSQL store is refused, naming the Node it needs and the one it found', () => {
    expect(() => createFleet(postgresStore, { log: () => undefined })).toThrow(
      `a PostgreSQL store (a fleet) needs Node.js ${FLEET_NODE} or later, for its queue's engine (pg-boss); this is Node.js ${process.versions.node}`,
    );
  });

  it.skipIf(older)('on this Node a PostgreSQL store makes a fleet, with a queue to place runs', () => {
    const fleet = createFleet(postgresStore, { log: () => undefined });
    expect(fleet.shared).toBe(true);
    expect(fleet.queue).toBeDefined();
  });

  it('alone (SQLite, memory) any supported Node runs it, with no fleet queue', () => {
    const fleet = createFleet({ database: undefined } as unknown as HeadlessStore, { log: () => undefined });
    expect([fleet.shared, fleet.queue]).toEqual([false, undefined]);
  });
});
