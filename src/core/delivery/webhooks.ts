import type { WebhookEvent } from '../../contract/records';
import type { ReplyAddress, StoredRun, WebhookTarget, Workspace } from '../types';
import { type DispatcherOptions, WebhookDispatcher } from './dispatcher';
import { checkSecret, checkWorkspace, targetsFor } from './targets';

export type { WebhookOptions } from './targets';

/**
 * Completion webhooks (docs/webhooks.md): the targets a run gets at its start, and the dispatcher
 * that delivers what its record's outbox owes (delivery/outbox.ts) once that record is stored.
 */
export class Webhooks {
  private readonly dispatcher: WebhookDispatcher;

  constructor(private readonly o: DispatcherOptions) {
    if (o.secret !== undefined) checkSecret(o.secret, 'webhooks.secret');
    this.dispatcher = new WebhookDispatcher(o);
  }

  checkWorkspace(workspace: Workspace): void {
    checkWorkspace(this.o, workspace);
  }

  targetsFor(workspace: Workspace, requested?: { url: string; events?: WebhookEvent[] }, reply?: { url: string; address: ReplyAddress }): WebhookTarget[] {
    return targetsFor(this.o, workspace, requested, reply);
  }

  /** Delivers what a stored record owes; call it once the write that owes it has succeeded. */
  schedule(run: StoredRun): void {
    this.dispatcher.schedule(run);
  }

  takeOver(isGone: (owner: string | undefined) => Promise<boolean>): Promise<void> {
    return this.dispatcher.takeOver(isGone);
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}
