/**
 * @module The sandbox user: who a root service's sandboxed agents run as (docs/security.md:
 * Confining agents), never host root. What the run may write is handed to it; its name is listed
 * where programs look it up; its own git trusts the repository it is shown.
 */
import { chmodSync, chownSync, readFileSync, statSync } from 'node:fs';
import { execa } from 'execa';
import { SpawnFailure } from '../process/spawner';
import type { SandboxUser } from './bubblewrap';

/** The unprivileged "nonroot" id distroless images use, so it owns nothing else on most hosts. */
export const DEFAULT_SANDBOX_USER: SandboxUser = { uid: 65532, gid: 65532 };

/** What `handOver` needs of the run. */
export interface HandOverInput {
  workspaceId: string;
  workspace: string;
  readOnly: boolean;
  madeForRun?: boolean;
}

/**
 * Under a root service, what the run may write must be its user's: its private temporary folder,
 * and its workspace. A worktree the service made for the run's Session is handed over whole
 * (links themselves, never what they point to; no agent of that Session runs meanwhile); a
 * workspace the operator chose must already be the sandbox user's, or the run is refused saying how.
 */
export async function handOver(a: { run: HandOverInput; tmp: string; user: SandboxUser }): Promise<void> {
  const { run, tmp, user } = a;
  chownSync(tmp, user.uid, user.gid);
  chmodSync(tmp, 0o700);
  if (run.madeForRun) {
    const owned = await execa('chown', ['-R', '-h', '-P', '--', `${user.uid}:${user.gid}`, run.workspace], { reject: false, stdin: 'ignore' });
    if (owned.exitCode !== 0) throw new SpawnFailure(`the run's worktree could not be handed to the sandbox's user: ${String(owned.stderr).trim()}`);
    return;
  }
  if (run.readOnly || statSync(run.workspace).uid === user.uid) return;
  throw new SpawnFailure(
    `workspace "${run.workspaceId}" is sandboxed under a root service, whose agents run as uid ${user.uid} (sandbox.user), but its folder is not theirs: chown -R ${user.uid}:${user.gid} ${run.workspace}, or use isolation "worktree"`,
  );
}

/**
 * The agent's own git, as the sandbox's user, in a repository whose git folder is root's (a
 * worktree's): git would refuse it as of dubious ownership. Inside its sandbox that repository is
 * the only one it sees, and nothing it runs there reaches the service.
 */
export function trustOwnRepository(env: Record<string, string>): Record<string, string> {
  const count = Number(env.GIT_CONFIG_COUNT ?? '0') || 0;
  return { GIT_CONFIG_COUNT: String(count + 1), [`GIT_CONFIG_KEY_${count}`]: 'safe.directory', [`GIT_CONFIG_VALUE_${count}`]: '*' };
}

/** The host's `/etc/passwd` or `/etc/group`, with an entry for the sandbox user where it has none. */
export function identityFile(name: 'passwd' | 'group', user: SandboxUser): string {
  let host = '';
  try {
    host = readFileSync(`/etc/${name}`, 'utf8');
  } catch {
    host = '';
  }
  const id = name === 'passwd' ? user.uid : user.gid;
  const listed = host.split('\n').some((line) => line.split(':')[2] === String(id));
  if (listed) return host;
  const entry =
    name === 'passwd' ? `headless-agent:x:${user.uid}:${user.gid}:headless-run-webhook sandbox:/nonexistent:/bin/sh` : `headless-agent:x:${user.gid}:`;
  return `${host}${host === '' || host.endsWith('\n') ? '' : '\n'}${entry}\n`;
}
