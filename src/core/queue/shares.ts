import { Refusal } from '../../contract/problems';

/** A source's share (a trigger's), resolved: its runs at once, and its runs waiting at most. */
export interface Share {
  key: string;
  running: number;
  queued: number;
}

/** Seconds a sender is told to wait when its source's share is full: a burst takes minutes to drain. */
const RETRY_AFTER_S = 30;

/**
 * Each source's runs accepted on this instance and not yet ended, running or queued, so that one
 * source's burst cannot take the whole queue from other callers (docs/triggers.md: Limits): past
 * `running + queued` a start is refused `503 trigger_busy` with `Retry-After`: the answer senders
 * retry (Alertmanager, GitLab and PagerDuty retry a 5xx; a 4xx they drop, or GitLab counts against
 * the webhook). How many of
 * them run at once is admission's (`Admission`'s per-source slots).
 */
export class ShareSeats {
  private readonly held = new Map<string, number>();

  /** A seat for one more run, taken at once (no await between the check and the taking); refused when the share is full. */
  take(share: Share): { release(): void } {
    const count = this.held.get(share.key) ?? 0;
    if (count >= share.running + share.queued) {
      const detail = `${share.key} has ${count} runs running or waiting, all of its share (${share.running} at once, ${share.queued} waiting); retry later.`;
      throw new Refusal('trigger_busy', detail, { retryAfterSeconds: RETRY_AFTER_S });
    }
    this.held.set(share.key, count + 1);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        const left = (this.held.get(share.key) ?? 1) - 1;
        if (left > 0) this.held.set(share.key, left);
        else this.held.delete(share.key);
      },
    };
  }
}
