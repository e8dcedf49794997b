// Starts the built daemon (`dist/cli.cjs serve --port 0`) in `dir`, for the bench and the soak; or
// another server that prints the same `listening on URL` line.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');

/** Resolves with the child and its base URL once it prints its `listening on` line. */
export async function spawnServer(args, options, node = process.execPath) {
  const child = spawn(node, args, { ...options, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((done, fail) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const m = /listening on (\S+)\n/.exec(out);
      if (m) done(m[1]);
    });
    child.once('exit', (code) => fail(new Error(`server exited ${code}`)));
  });
  return { child, url };
}

export const spawnDaemon = (dir, nodeFlags = [], env = process.env, node = process.execPath) =>
  spawnServer([...nodeFlags, join(ROOT, 'dist/cli.cjs'), 'serve', '--port', '0', '--data-dir', join(dir, '.headless')], { cwd: dir, env }, node);
