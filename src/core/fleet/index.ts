import type { HeadlessStore } from '../store/headless-store';
import type { Fleet, FleetOptions } from './fleet';
import { LocalFleet } from './local-fleet';
import { PostgresFleet } from './postgres-fleet';

export type { Fleet, FleetAnswer, FleetHandlers, FleetOptions, FleetRequest } from './fleet';

export type { AdvertisedWorkspace } from './fleet';
export type { FleetQueue } from './fleet-queue';

/** The Node.js a fleet needs: its queue's engine, pg-boss, declares it (docs/decisions.md: The fleet's engine). */
export const FLEET_NODE = '22.12.0';

export function createFleet(store: HeadlessStore, o: FleetOptions): Fleet {
  const db = store.database;
  if (db?.dialect !== 'postgres' || !db.connectionString) return new LocalFleet();
  if (olderThan(process.versions.node, FLEET_NODE)) {
    throw new Error(
      `a PostgreSQL store (a fleet) needs Node.js ${FLEET_NODE} or later, for its queue's engine (pg-boss); this is Node.js ${process.versions.node}`,
    );
  }
  return new PostgresFleet(db, db.connectionString, o);
}

function olderThan(version: string, floor: string): boolean {
  const [a, b] = [version, floor].map((v) => v.split('.').map(Number));
  for (let i = 0; i < 3; i++) if ((a?.[i] ?? 0) !== (b?.[i] ?? 0)) return (a?.[i] ?? 0) < (b?.[i] ?? 0);
  return false;
}
