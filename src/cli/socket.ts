import { chmodSync, existsSync, rmSync, statSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { createNodeServer } from '../adapters/node';
import type { HeadlessHandler } from '../core/handler';
import { fail } from './fail';

/**
 * `serve --socket PATH`: the API on a Unix-domain socket too (docs/security.md: A socket), as
 * Docker's daemon does: whoever the file's mode lets connect is a local caller, whatever
 * `localCallers` says of TCP. The file is created private (0600 by the umask, so no one can
 * connect before its mode is set), then given `mode`.
 */
export async function listenOnSocket(handler: HeadlessHandler, path: string, mode: number): Promise<Server> {
  if (existsSync(path)) {
    if (!statSync(path).isSocket()) throw new Error(`${path} exists and is not a socket`);
    if (await answers(path)) throw new Error(`${path} is the socket of a running process`);
    rmSync(path);
  }
  const server = createNodeServer(handler, { unixSocket: true });
  const umask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => resolve());
    });
  } finally {
    process.umask(umask);
  }
  chmodSync(path, mode);
  return server;
}

/** Whether a process listens on the socket file (one a killed daemon left does not). */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

/** The socket listener, or a failure that says what is wrong. */
export async function openSocket(handler: HeadlessHandler, path: string, mode: string) {
  if (!/^[0-7]{3}$/.test(mode)) fail(`--socket-mode must be three octal digits (600, 660), not "${mode}"`);
  try {
    return await listenOnSocket(handler, path, Number.parseInt(mode, 8));
  } catch (error) {
    await handler.close();
    return fail(`cannot listen on ${path}: ${error instanceof Error ? error.message : String(error)}`, 1);
  }
}
