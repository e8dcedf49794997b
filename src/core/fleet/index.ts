import type { HeadlessStore } from '../store/keyv-store';
import type { Fleet, FleetOptions } from './fleet';
import { LocalFleet } from './local-fleet';
import { PostgresFleet } from './postgres-fleet';

export type { Fleet, FleetAnswer, FleetHandlers, FleetOptions, FleetRequest } from './fleet';

export function createFleet(store: HeadlessStore, o: FleetOptions): Fleet {
  const sql = store.sql;
  return sql?.dialect === 'postgres' && sql.connectionString ? new PostgresFleet(sql, sql.connectionString, o) : new LocalFleet();
}
