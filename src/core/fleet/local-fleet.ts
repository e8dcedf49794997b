import { newSortableId } from '../util/ids';
import type { Fleet, FleetAnswer, FleetHandlers } from './fleet';

/** One instance alone on its store: every owner but itself is gone. */
export class LocalFleet implements Fleet {
  readonly instanceId = newSortableId('boot_');
  readonly shared = false;
  private readonly claims = new Map<string, string>();

  async join(handlers: FleetHandlers): Promise<void> {
    await handlers.takeOver(async (owner) => owner !== this.instanceId);
  }

  async claim(key: string, holder: string): Promise<string | undefined> {
    const current = this.claims.get(key);
    if (current !== undefined) return current;
    this.claims.set(key, holder);
    return undefined;
  }

  async release(key: string, holder: string): Promise<void> {
    if (this.claims.get(key) === holder) this.claims.delete(key);
  }

  async holder(key: string): Promise<string | undefined> {
    return this.claims.get(key);
  }

  exclusive<T>(_key: string, work: () => Promise<T>): Promise<T> {
    return work();
  }

  async ask(): Promise<FleetAnswer> {
    // Every run's owner is this instance or gone: there is no one to ask.
    return { ok: false, code: 'run_not_running', message: 'The run was left by an instance that is gone.' };
  }

  async advertise(): Promise<void> {}

  async advertised(): Promise<undefined> {
    return undefined;
  }

  hearsChanges(): boolean {
    return true;
  }

  leaseHeld(): boolean {
    return true;
  }

  async leave(): Promise<void> {}
}
