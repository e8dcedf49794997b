/**
 * @module The SQLite WAL's fsync, done on the thread pool instead of inside COMMIT. With
 * `synchronous=NORMAL` a WAL commit only writes its frames (to the page cache, microseconds) and
 * SQLite syncs the WAL before each checkpoint; `synchronous=FULL` differs only in syncing the WAL
 * after each commit, which is what this does, off the event loop, before anything the commit
 * wrote is answered. Commits that come while one fsync runs share the next one, though the
 * connection holds its next commit back until then (node-sqlite.ts): group commit.
 */
import { type FileHandle, open } from 'node:fs/promises';
import { dirname } from 'node:path';

type Done = (error?: unknown) => void;

export class WalSync {
  private wal: FileHandle | undefined;
  /** Whether the folder has been synced once, so the WAL file's own entry in it is durable. */
  private folderSynced = false;
  private running = false;
  /** Waiting for the fsync after the one that runs. */
  private next: Done[] = [];
  /** Called once no fsync runs. */
  private idle: Array<() => void> = [];

  /** `file` is the database; its WAL is `file-wal`, which SQLite keeps while a connection is open. */
  constructor(private readonly file: string) {}

  /** Calls `done` once everything committed before this call is on disk, or with the fsync's error. */
  afterCommit(done: Done): void {
    this.next.push(done);
    if (!this.running) this.run();
  }

  /** Calls `then` once no fsync runs (the connection's next commit waits for it). */
  whenIdle(then: () => void): void {
    if (this.running) this.idle.push(then);
    else then();
  }

  /** Resolves once what was committed so far is on disk (at once when no fsync is due). */
  durable(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve, reject) => this.afterCommit((error) => (error ? reject(error) : resolve())));
  }

  /** Waits for the fsync due, then lets the WAL go. */
  async close(): Promise<void> {
    await this.durable().catch(() => undefined);
    await this.wal?.close();
    this.wal = undefined;
  }

  private run(): void {
    const batch = this.next;
    this.next = [];
    this.running = true;
    const finish = (error?: unknown) => {
      this.running = false;
      for (const done of batch) done(error);
      if (this.next.length > 0) return this.run();
      for (const then of this.idle.splice(0)) then();
    };
    this.sync().then(() => finish(), finish);
  }

  private async sync(): Promise<void> {
    this.wal ??= await open(`${this.file}-wal`, 'r');
    await this.wal.sync();
    if (this.folderSynced) return;
    const folder = await open(dirname(this.file), 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    this.folderSynced = true;
  }
}
