// Starts the built daemon (`dist/cli.js serve --port 0`) in `dir`, for the bench and the soak.
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');

/** Resolves with the child and its base URL once it prints its `listening on` line. */
export async function spawnDaemon(dir, nodeFlags = [], env = process.env) {
  const child = spawn(process.execPath, [...nodeFlags, join(ROOT, 'dist/cli.js'), 'serve', '--port', '0'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((done, fail) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const m = /listening on (\S+)\n/.exec(out);
      if (m) done(m[1]);
    });
    child.once('exit', (code) => fail(new Error(`daemon exited ${code}`)));
  });
  return { child, url };
}
