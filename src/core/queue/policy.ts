import type { QueueSettings, Workspace } from '../types';

/** The queue a workspace's starts use: its own settings over the installation's. */
export interface QueuePolicy {
  max: number;
  ttlMs: number;
  /** Whose queued runs count against `max`: the workspace's own, or every workspace's. */
  scope: 'workspace' | 'installation';
}

const DEFAULT_MAX = 100;
const DEFAULT_TTL_MS = 3_600_000;

/** The queue a run waits in when no queue is configured but it must wait (a schedule's overlap "queue"). */
export const DEFAULT_QUEUE: QueuePolicy = { max: DEFAULT_MAX, ttlMs: DEFAULT_TTL_MS, scope: 'installation' };

/** The workspace's queue, or undefined when starts there are refused at capacity (the spec's `429`). */
export function queuePolicy(installation: QueueSettings | undefined, workspace: Pick<Workspace, 'queue'>): QueuePolicy | undefined {
  if (workspace.queue === false) return undefined;
  const own = workspace.queue !== undefined;
  const settings = workspace.queue ?? installation;
  if (!settings) return undefined;
  return { max: settings.max ?? DEFAULT_MAX, ttlMs: settings.ttlMs ?? DEFAULT_TTL_MS, scope: own ? 'workspace' : 'installation' };
}

/** Throws on settings that cannot work (a library caller's typo), naming where they are. */
export function checkQueueSettings(settings: QueueSettings | false | undefined, where: string): void {
  if (!settings) return;
  for (const [name, value] of Object.entries({ max: settings.max, ttlMs: settings.ttlMs })) {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1)) throw new Error(`${where}.${name} must be a whole number of at least 1, not ${value}`);
  }
}
