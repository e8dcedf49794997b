import { newSecret, sha256 } from '../util/ids';

export interface RunTokenGrant {
  taskId: string;
  workspaceId: string;
  resumeId: string;
}

/**
 * Run tokens: one fresh secret per run, valid only while the run is running. Only a hash is
 * held, in memory: tokens are never stored and die with the process, as do the runs they serve.
 */
export class RunTokens {
  private readonly byHash = new Map<string, RunTokenGrant>();
  private readonly hashByTask = new Map<string, string>();

  issue(grant: RunTokenGrant): string {
    const token = newSecret();
    const hash = sha256(token);
    this.byHash.set(hash, grant);
    this.hashByTask.set(grant.taskId, hash);
    return token;
  }

  /** The grant of the token whose digest (`sha256`) this is, while its run runs. */
  lookup(digest: string): RunTokenGrant | undefined {
    return this.byHash.get(digest);
  }

  revoke(taskId: string): void {
    const hash = this.hashByTask.get(taskId);
    if (hash === undefined) return;
    this.byHash.delete(hash);
    this.hashByTask.delete(taskId);
  }
}
