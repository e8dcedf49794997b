#!/usr/bin/env node
// A stand-in for Claude Code in the event-stream bench: with --version it names itself as the real
// CLI does; otherwise it prints Claude-style stream-json, BUSY_EVENTS assistant messages (and tool
// calls) at BUSY_RATE per second, then a result. Only the bench puts it on a daemon's PATH.
const write = (event) => new Promise((resolve) => (process.stdout.write(`${JSON.stringify(event)}\n`) ? resolve() : process.stdout.once('drain', resolve)));
if (process.argv.includes('--version')) {
  process.stdout.write('2.1.328 (Claude Code)\n');
  process.exit(0);
}
process.stdin.resume().on('data', () => undefined);
const count = Number(process.env.BUSY_EVENTS ?? 2000);
// BUSY_STAMP=1: every event a message saying when it was printed (the event-latency bench).
const stamp = process.env.BUSY_STAMP === '1';
// BUSY_GATE=<file>: say it is ready (<file>.<pid>), then print only once <file> exists, so many
// agents' start-up does not fall on each other's printing.
const gate = process.env.BUSY_GATE;
if (gate) {
  const { existsSync, writeFileSync } = await import('node:fs');
  writeFileSync(`${gate}.${process.pid}`, '');
  while (!existsSync(gate)) await new Promise((r) => setTimeout(r, 5));
}
const perTick = Math.max(1, Math.round(Number(process.env.BUSY_RATE ?? 200) / 50));
await write({ type: 'system', subtype: 'init', session_id: 'busy-session' });
for (let i = 0; i < count; i += perTick) {
  for (let j = i; j < Math.min(count, i + perTick); j++) {
    const block =
      j % 4 === 3 && !stamp
        ? { type: 'tool_use', id: `t${j}`, name: 'Bash', input: { command: 'true' } }
        : { type: 'text', text: `${stamp ? `at=${Date.now()} ` : ''}message ${j} `.padEnd(200, '.') };
    await write({ type: 'assistant', message: { content: [block] } });
  }
  await new Promise((r) => setTimeout(r, 20));
}
await write({ type: 'result', subtype: 'success', result: 'done', usage: { input_tokens: 1, output_tokens: 1 } });
process.exit(0);
