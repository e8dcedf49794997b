import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * The demo agent (`serve --demo`): a stand-in for a coding agent that needs no model and no
 * credentials, so the Quick start ends in a succeeded run and an Inbox item on any machine. It
 * only reads: it lists the workspace, then pushes a report with `headless-inbox`, as a real
 * agent asked to report would. Its stdout is one JSON event per line (demo/agent.ts reads it).
 * With `--ask` (a run under `permissions: "ask"`, docs/approvals.md) its prompt is the first line
 * of stdin, and it asks before it writes its report to `demo-notes.md`, reading the answer from
 * the next line.
 */

const entries = (count: number) => `${count} ${count === 1 ? 'entry' : 'entries'}`;
const emit = (event: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(event)}\n`);

async function readPrompt(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

function listWorkspace(): string[] {
  emit({ type: 'tool', name: 'list_files', status: 'started', id: 'list' });
  const names = readdirSync(process.cwd(), { withFileTypes: true })
    .filter((entry) => !entry.name.startsWith('.'))
    .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name))
    .sort();
  emit({ type: 'tool', name: 'list_files', status: 'succeeded', id: 'list' });
  return names;
}

function reportOf(prompt: string, names: string[]): string {
  const shown = names.slice(0, 20).map((name) => `- ${name}`);
  const more = names.length > shown.length ? [`- … and ${names.length - shown.length} more`] : [];
  return [`You asked: ${prompt}`, '', `The workspace holds ${entries(names.length)}:`, ...shown, ...more].join('\n');
}

function report(body: string): boolean {
  emit({ type: 'tool', name: 'headless-inbox', status: 'started', id: 'push' });
  const pushed = spawnSync('headless-inbox', ['push', '--title', 'Demo report'], { input: body, encoding: 'utf8' });
  const ok = pushed.status === 0;
  emit({ type: 'tool', name: 'headless-inbox', status: ok ? 'succeeded' : 'failed', id: 'push' });
  if (!ok) emit({ type: 'error', message: (pushed.stderr || String(pushed.error ?? 'headless-inbox failed')).trim() });
  return ok;
}

/** Under `--ask`: the prompt, then the answer to its one question, each a line of stdin (`{}` once it is closed). */
function stdinLines(): () => Promise<string> {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  return async () => ((await lines.next()).value as string | undefined) ?? '{}';
}

/** Asks to write its notes; writes them if allowed. */
async function writeNotes(next: () => Promise<string>, body: string): Promise<void> {
  const file = join(process.cwd(), 'demo-notes.md');
  emit({ type: 'permission', title: 'Write demo-notes.md', kind: 'edit', paths: [file] });
  const answer = JSON.parse(await next()) as { allow?: boolean };
  if (!answer.allow) return void emit({ type: 'message', text: 'Not allowed to write demo-notes.md: it stays unwritten.' });
  emit({ type: 'tool', name: 'write_file', status: 'started', id: 'notes' });
  writeFileSync(file, `${body}\n`);
  emit({ type: 'tool', name: 'write_file', status: 'succeeded', id: 'notes' });
}

async function main(): Promise<number> {
  const asks = process.argv.includes('--ask');
  const next = asks ? stdinLines() : undefined;
  const prompt = next ? (JSON.parse(await next()) as { prompt: string }).prompt : await readPrompt();
  emit({ type: 'message', text: 'Demo agent: no model is called; looking at the workspace.' });
  const names = listWorkspace();
  const body = reportOf(prompt, names);
  if (next) await writeNotes(next, body);
  if (!report(body)) return 1;
  emit({ type: 'message', text: `Done: the workspace holds ${entries(names.length)}; the report is in the Inbox.` });
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    emit({ type: 'error', message: error instanceof Error ? error.message : String(error) });
    process.exit(1);
  },
);
