/** The deliveries to one trigger that failed verification, as its deliveries log shows them. */
export interface UnverifiedSample {
  /** How many since this instance started. */
  count: number;
  since: string;
  /** The latest few, newest first: when, and from which peer address. */
  recent: Array<{ receivedAt: string; peer?: string }>;
}

/** Kept per trigger: enough to see who sends them, never a growing store. */
const KEPT = 20;

/**
 * Deliveries refused for a wrong or missing signature or token (docs/triggers.md), counted and
 * sampled in memory, never written: anyone can send them, so each must cost no durable write.
 * Only configured triggers are kept, so the names an outsider sends never grow it.
 */
export class UnverifiedDeliveries {
  private readonly triggers = new Map<string, UnverifiedSample>();
  private readonly since = new Date().toISOString();

  add(trigger: string, peer: string | undefined): void {
    const sample = this.of(trigger);
    const recent = [{ receivedAt: new Date().toISOString(), ...(peer === undefined ? {} : { peer }) }, ...sample.recent].slice(0, KEPT);
    this.triggers.set(trigger, { ...sample, count: sample.count + 1, recent });
  }

  of(trigger: string): UnverifiedSample {
    return this.triggers.get(trigger) ?? { count: 0, since: this.since, recent: [] };
  }
}
