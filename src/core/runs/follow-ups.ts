/**
 * @module Follow-ups (docs/http-api.md: Follow-ups): a caller's message to a running run's agent,
 * taken at once and given at the agent's next turn (runs/follow-up-turn.ts), on the instance that
 * runs it. A run another instance runs gets it through the fleet, its text through the store (a
 * notification holds too little for it).
 */
import { Refusal } from '../../contract/problems';
import type { RunEvents } from '../events/run-events';
import type { Fleet } from '../fleet/fleet';
import type { HeadlessStore } from '../store/keyv-store';
import type { StoredRun } from '../types';
import { newSortableId } from '../util/ids';
import { canContinue } from './admission';
import type { RunLauncher } from './launcher';
import type { LiveRun } from './live-run';

/** Follow-ups waiting for one run's next turn, at most. */
export const FOLLOW_UPS_MAX = 10;
/** How long a forwarded follow-up's text waits in the store for its run's instance. */
const FORWARDED_TTL_MS = 10 * 60_000;
const keyOf = (id: string) => `message:${id}`;

export interface FollowUpResources {
  launcher: RunLauncher;
  events: RunEvents;
  fleet: Fleet;
  store: HeadlessStore;
  instanceId: string;
  find(taskId: string): Promise<StoredRun | undefined>;
}

export interface FollowUpTaken {
  taskId: string;
  messageId: string;
  /** Follow-ups waiting for its next turn, this one included (where its instance said). */
  pending?: number;
}

export class FollowUps {
  constructor(private readonly $: FollowUpResources) {}

  async send(taskId: string, text: string): Promise<FollowUpTaken> {
    const live = this.$.launcher.get(taskId);
    if (live) return this.take(live, text, newSortableId('msg_'));
    const stored = await this.$.find(taskId);
    if (!stored) throw new Refusal('run_not_found', `No run "${taskId}".`);
    if (stored.status === 'queued') throw new Refusal('run_not_running', `Run "${taskId}" has not started yet: a follow-up goes to a running agent.`);
    if (stored.status !== 'running' || stored.bootId === this.$.instanceId) throw new Refusal('run_not_running', `Run "${taskId}" has ended.`);
    return this.forward(stored, text);
  }

  /** Another instance's follow-up for a run of this one, its text from the store. */
  async takeForwarded(taskId: string, id: string): Promise<void> {
    const kept = await this.$.store.get<{ taskId: string; text: string }>(keyOf(id));
    const live = this.$.launcher.get(taskId);
    if (!kept || kept.taskId !== taskId || !live) throw new Refusal('run_not_running', `Run "${taskId}" is not running here.`);
    await this.$.store.delete(keyOf(id));
    this.take(live, kept.text, id);
  }

  private async forward(stored: StoredRun, text: string): Promise<FollowUpTaken> {
    const { taskId } = stored;
    const id = newSortableId('msg_');
    await this.$.store.set(keyOf(id), { taskId, text }, FORWARDED_TTL_MS);
    const answer = await this.$.fleet.ask(stored.bootId, { op: 'message', taskId, id });
    if (answer.ok) return { taskId, messageId: id };
    await this.$.store.delete(keyOf(id)).catch(() => undefined);
    throw new Refusal(answer.code, answer.message, answer.code === 'run_owner_unreachable' ? { retryAfterSeconds: 5 } : {});
  }

  private take(live: LiveRun, text: string, id: string): FollowUpTaken {
    const { taskId, reservation } = live;
    if (live.ending) throw new Refusal('run_not_running', `Run "${taskId}" is ending.`);
    const { adapter } = reservation;
    if (!canContinue(adapter))
      throw new Refusal('run_cannot_continue', `${adapter.name} cannot be given another turn headless: run "${taskId}" takes no follow-up.`);
    if (live.followUps.length >= FOLLOW_UPS_MAX)
      throw new Refusal('rate_limited', `${FOLLOW_UPS_MAX} follow-ups already wait for the next turn of run "${taskId}".`, { retryAfterSeconds: 30 });
    live.followUps.push({ id, text });
    this.$.events.append(taskId, 'follow-up', { id, state: 'queued', chars: text.length });
    return { taskId, messageId: id, pending: live.followUps.length };
  }
}
