import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkAdminToken } from '../core/http/auth';

/**
 * Where the daemon reads its admin token (docs/security.md: Credentials): `--admin-token-file`,
 * else `HEADLESS_ADMIN_TOKEN_FILE`, else systemd's credential `headless-admin-token`, else
 * `HEADLESS_ADMIN_TOKEN` (with a warning: a process's environment is readable by every process of
 * its user, agents included, in /proc).
 */
export interface AdminToken {
  token?: string;
  /** The file it was read from, which sandboxed runs never see. */
  file?: string;
  /** Said on stderr at start. */
  warning?: string;
}

export function readAdminToken(flag: string | undefined, env: NodeJS.ProcessEnv): AdminToken {
  const systemd = env.CREDENTIALS_DIRECTORY ? join(env.CREDENTIALS_DIRECTORY, 'headless-admin-token') : undefined;
  const file = flag ?? (env.HEADLESS_ADMIN_TOKEN_FILE || undefined) ?? (systemd && existsSync(systemd) ? systemd : undefined);
  if (file !== undefined) return { token: fromFile(file, file === systemd), file: resolve(file) };
  const token = env.HEADLESS_ADMIN_TOKEN || undefined;
  checkAdminToken(token);
  return token === undefined
    ? {}
    : { token, warning: 'the admin token is in the environment, which agents running as this user can read (/proc/<pid>/environ): prefer --admin-token-file' };
}

function fromFile(file: string, managed: boolean): string {
  let stat;
  try {
    stat = statSync(file);
  } catch (error) {
    throw new Error(`cannot read the admin token file ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  if (!stat.isFile()) throw new Error(`the admin token file ${file} is not a file`);
  // Others must not read it; systemd's credential files are its own business.
  if (!managed && (stat.mode & 0o077) !== 0) throw new Error(`the admin token file ${file} can be read by others: chmod 600 ${file}`);
  const token = readFileSync(file, 'utf8').trim();
  if (token === '') throw new Error(`the admin token file ${file} is empty`);
  checkAdminToken(token);
  return token;
}
