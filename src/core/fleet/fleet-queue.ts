import type { PgBoss } from 'pg-boss';
import { StorageError } from '../../contract/problems';
import { loadOptional } from '../util/optional-package';

/** What taking a placed run came to (queue/runner.ts's results, and `absent`: no such record, as when its start failed). */
export type PlacedTake = 'started' | 'waiting' | 'gone' | 'refused' | 'absent';

export interface ServedQueues {
  /** The workspaces this member runs: it works their queues only. */
  workspaces: string[];
  /** Run slots free on this member now: it fetches a job only while one is. */
  room(): number;
  /** Takes the queued run `taskId`, placed in `workspaceId`'s queue, and starts it here, unless it must wait. */
  take(taskId: string, workspaceId: string): Promise<PlacedTake>;
  log: (message: string, error?: unknown) => void;
}

/**
 * Where a fleet's queued runs wait to be placed (docs/deployment.md: Running several instances): a
 * pg-boss queue per workspace, worked only by the members that run that workspace. A job places a
 * run; it does not run it: the member that fetches it takes the queued record (one compare-and-set,
 * so a run starts once whatever the engine retries), and the job is done. A job fetched by a member
 * that dies before taking it is retried by the engine once it expires.
 */
export interface FleetQueue {
  /** Sends the job that places a queued run, once its record is written; again for the same run while one waits: none added. */
  place(workspaceId: string, taskId: string): Promise<void>;
  /** Works the queues of `served`; again on `kick`, and every `pollMs`. */
  serve(served: ServedQueues): Promise<void>;
  /** Asks for a pass now: a slot freed, or a run was queued here. */
  kick(): void;
  close(): Promise<void>;
}

/** The pg-boss queue of a workspace's runs (workspace ids are valid queue names). */
export const queueOf = (workspaceId: string) => `headless-run.${workspaceId}`;
/** A job whose member died before taking its run is retried after this. */
const EXPIRE_SECONDS = 60;
/** A job whose run must wait (its Session busy, the run it follows still running) is placed again after this; one the store refused, after longer. */
const AGAIN_SECONDS = { waiting: 1, refused: 5 };
/** A job whose record cannot be read is tried again this often, a few times, then dropped. */
const ABSENT = { retryLimit: 3, retryDelay: 1 };
const POLL_MS = 1000;

export class PgBossQueue implements FleetQueue {
  private boss: Promise<PgBoss> | undefined;
  private readonly made = new Set<string>();
  private served: ServedQueues | undefined;
  private timer: NodeJS.Timeout | undefined;
  private passing = false;
  private again = false;
  /** Where the next pass starts among the served queues, so no workspace's queue starves another's. */
  private next = 0;

  constructor(private readonly o: { connectionString: string; name: string; log: (message: string, error?: unknown) => void; pollMs?: number }) {}

  private started(): Promise<PgBoss> {
    this.boss ??= (async () => {
      const { PgBoss } = await loadOptional(() => import('pg-boss'), 'pg-boss', "a fleet's queue");
      // Its cron is not used here (schedules/); its supervisor retries jobs whose member died.
      const boss = new PgBoss({ connectionString: this.o.connectionString, application_name: this.o.name, max: 2, schedule: false });
      boss.on('error', (error) => this.o.log('the fleet queue (pg-boss) reported an error', error));
      await boss.start();
      return boss;
    })();
    return this.boss;
  }

  /** Makes a workspace's queue once per process (pg-boss keeps queues in its own tables). */
  private async queue(boss: PgBoss, workspaceId: string): Promise<string> {
    const name = queueOf(workspaceId);
    if (!this.made.has(name)) {
      // `short`: one waiting job per run (its id the key), so placing a run again while one waits adds none.
      if (!(await boss.getQueue(name)))
        await boss.createQueue(name, { policy: 'short', expireInSeconds: EXPIRE_SECONDS, ...ABSENT }).catch(ignoreMadeMeanwhile);
      this.made.add(name);
    }
    return name;
  }

  async place(workspaceId: string, taskId: string): Promise<void> {
    try {
      const boss = await this.started();
      await boss.send(await this.queue(boss, workspaceId), { taskId }, { singletonKey: taskId });
    } catch (error) {
      throw new StorageError(`the fleet queue could not take the run: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  async serve(served: ServedQueues): Promise<void> {
    const boss = await this.started();
    for (const id of served.workspaces) await this.queue(boss, id);
    this.served = served;
    this.timer = setInterval(() => this.kick(), this.o.pollMs ?? POLL_MS);
    this.timer.unref();
    this.kick();
  }

  kick(): void {
    if (!this.served) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = true;
    void this.pass()
      .catch((error: unknown) => this.served?.log('the fleet queue could not be read', error))
      .finally(() => {
        this.passing = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Fetches while slots are free, a job from each served queue in turn, until every queue is empty. */
  private async pass(): Promise<void> {
    const served = this.served;
    if (!served || served.workspaces.length === 0) return;
    const boss = await this.started();
    let empty = 0;
    while (this.served && served.room() > 0 && empty < served.workspaces.length) {
      const workspaceId = served.workspaces[this.next++ % served.workspaces.length] as string;
      const [job] = await boss.fetch<{ taskId: string }>(queueOf(workspaceId));
      if (!job) {
        empty += 1;
        continue;
      }
      empty = 0;
      await this.settle(boss, workspaceId, job, await served.take(String(job.data?.taskId), workspaceId).catch(() => 'refused' as const));
    }
  }

  private async settle(boss: PgBoss, workspaceId: string, job: { id: string; name: string; data: { taskId: string } }, taken: PlacedTake): Promise<void> {
    if (taken === 'started' || taken === 'gone') await boss.complete(job.name, job.id);
    else if (taken === 'absent') await boss.fail(job.name, job.id, { why: 'no such run' });
    else {
      // Placed again before this job is done, so the run is never without one.
      await boss.send(queueOf(workspaceId), job.data, { startAfter: AGAIN_SECONDS[taken], singletonKey: job.data.taskId });
      await boss.complete(job.name, job.id);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.served = undefined;
    const boss = this.boss;
    this.boss = undefined;
    // Jobs fetched and not settled are retried by the engine once they expire.
    if (boss) await (await boss.catch(() => undefined))?.stop({ graceful: false }).catch(() => undefined);
  }
}

/** Another member made the queue between the look and the make. */
function ignoreMadeMeanwhile(error: unknown): void {
  if (!(error instanceof Error) || !/already exists|duplicate key/i.test(error.message)) throw error;
}
