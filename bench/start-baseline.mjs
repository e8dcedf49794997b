// The baseline of the start-latency figure, in a fresh process like the daemon: spawn the same
// agent (detached, stdout piped, until 'spawn') plus one durable write to the same kind of store.
// Prints the per-start milliseconds as JSON.
import { spawn } from 'node:child_process';
import { createSqliteKeyv } from '../dist/index.js';

const [agent, cwd, storeDir, count] = process.argv.slice(2);
const store = await createSqliteKeyv(storeDir);
const times = [];
for (let i = 0; i < Number(count); i++) {
  const t = performance.now();
  await new Promise((done, fail) => {
    const child = spawn(process.execPath, [agent, 'echo x'], { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.once('spawn', done);
    child.once('error', fail);
    child.stdout.resume();
    child.stderr.resume();
  });
  await store.set(`run:${i}`, { taskId: String(i), status: 'running', createdAt: new Date().toISOString() });
  times.push(performance.now() - t);
}
await store.disconnect();
console.log(JSON.stringify(times));
