#!/usr/bin/env node
// The floor of the event-latency figure: the same agents (AGENT, RUNS of them, started at once
// with this process's environment) relayed by a process that does the least a relay can, each
// stdout line written as it comes to the run's one SSE reader (GET /events/<n>): no parsing, no
// timeline, no store. In a process of its own, as the daemon is.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';

const runs = Number(process.env.RUNS);
const readers = new Map();
const agents = Array.from({ length: runs }, (_, n) => {
  const child = spawn(process.env.AGENT, ['-p', 'stamp'], { stdio: ['pipe', 'pipe', 'ignore'], detached: true });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk) => {
    text += chunk;
    const lines = text.split('\n');
    text = lines.pop();
    for (const line of lines) readers.get(n)?.write(`data: ${line}\n\n`);
  });
  child.once('exit', () => readers.get(n)?.end());
  return child;
});
const server = createServer((req, res) => {
  const n = Number(/^\/events\/(\d+)$/.exec(req.url ?? '')?.[1]);
  if (!(n >= 0 && n < runs)) return res.writeHead(404).end();
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.flushHeaders();
  readers.set(n, res);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`));
process.once('SIGTERM', () => {
  for (const agent of agents) agent.kill();
  server.close();
  process.exit(0);
});
