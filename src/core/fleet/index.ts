import type { HeadlessStore } from '../store/headless-store';
import type { Fleet, FleetOptions } from './fleet';
import { LocalFleet } from './local-fleet';
import { PostgresFleet } from './postgres-fleet';

export type { Fleet, FleetAnswer, FleetHandlers, FleetOptions, FleetRequest } from './fleet';

export function createFleet(store: HeadlessStore, o: FleetOptions): Fleet {
  const db = store.database;
  return db?.dialect === 'postgres' && db.connectionString ? new PostgresFleet(db, db.connectionString, o) : new LocalFleet();
}
