/**
 * @module A run's branch pushed to its workspace's remote (docs/worktrees.md: Publishing), by the
 * service's own git. It pushes from a scratch git folder of its own whose objects are the
 * repository's (`objects/info/alternates`): nothing of the repository's configuration, which an
 * agent may have written (its remotes, `url.*.insteadOf`, proxies, hooks), applies to the push.
 * The credential is given to that one git process alone, as command-line configuration in its
 * environment (`http.extraHeader`), never in a file. Never forced: a branch the remote has moved
 * on is refused, and the record says so.
 */
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { git } from './git';

export interface PushInput {
  /** The repository's common git folder: whose objects are pushed. */
  commonDir: string;
  /** The commit pushed, as the run's record has it. */
  sha: string;
  branch: string;
  /** The remote's URL, or a repository's absolute path. */
  remote: string;
  /** HTTP basic authentication, for an http(s) remote. */
  credential?: { username: string; token: string };
}

/** The push's own settings: its credential as a header (only on this process), no redirect to carry it elsewhere, no helper asked. */
function pushConfig(input: PushInput): Array<[string, string]> {
  const settings: Array<[string, string]> = [
    ['credential.helper', ''],
    ['http.followRedirects', 'false'],
    // Its refusal's own line ("! [rejected] … (fetch first)") ends its message, not advice.
    ['advice.pushUpdateRejected', 'false'],
  ];
  const { credential } = input;
  if (credential === undefined || !/^https?:/.test(input.remote)) return settings;
  const basic = Buffer.from(`${credential.username}:${credential.token}`).toString('base64');
  return [...settings, ['http.extraHeader', `Authorization: Basic ${basic}`]];
}

/** A git folder of the service's own, borrowing the repository's objects (and its shallow boundary, where it has one). */
async function scratchRepository(commonDir: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'headless-push-'));
  await mkdir(join(dir, 'objects', 'info'), { recursive: true });
  await mkdir(join(dir, 'refs', 'heads'), { recursive: true });
  await writeFile(join(dir, 'HEAD'), 'ref: refs/heads/main\n');
  await writeFile(join(dir, 'config'), '[core]\n\trepositoryformatversion = 0\n\tbare = true\n');
  await writeFile(join(dir, 'objects', 'info', 'alternates'), `${join(commonDir, 'objects')}\n`);
  if (existsSync(join(commonDir, 'shallow'))) await copyFile(join(commonDir, 'shallow'), join(dir, 'shallow'));
  return dir;
}

/** Pushes `sha` to the remote's `refs/heads/<branch>`; throws a GitError (its message without the token) when the remote refuses. */
export async function pushBranch(input: PushInput): Promise<void> {
  const dir = await scratchRepository(input.commonDir);
  try {
    const refspec = `${input.sha}:refs/heads/${input.branch}`;
    await git(['push', '--no-verify', '--', input.remote, refspec], { at: { gitDir: dir }, config: pushConfig(input) });
  } catch (error) {
    throw withoutSecret(error, input.credential?.token);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The error, its message cleared of the token in any form git could print it. */
function withoutSecret(error: unknown, token: string | undefined): unknown {
  if (!(error instanceof Error) || token === undefined) return error;
  const forms = [token, encodeURIComponent(token)];
  for (const form of forms) error.message = error.message.split(form).join('***');
  return error;
}
