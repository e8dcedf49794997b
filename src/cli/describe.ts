import type { RunEvent, RunRecord } from '../client/index';
import { AGENT_RULE_SAID } from '../contract/records';

/**
 * Text from the service (titles, messages, errors) as a terminal may show it: control characters
 * are written out as `\xNN`, so none can move the cursor, fake a status or set the clipboard (OSC 52).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
export const visible = (text: string) => text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

export const seconds = (ms: number | null) => (ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`);

/** How the caller CLI shows a run and an event to a person. */
export function describeRun(r: RunRecord): string {
  const lines = [
    `${r.taskId}  ${r.status}  ${r.agent}  workspace ${r.workspaceId}  session ${r.resumeId}`,
    ...(r.agentChosenBy && r.agentChosenBy !== 'asked' ? [`  agent: ${AGENT_RULE_SAID[r.agentChosenBy]}`] : []),
    ...(r.title ? [`  title: ${r.title}`] : []),
    ...(r.metadata
      ? [
          `  metadata: ${Object.entries(r.metadata)
            .map(([k, value]) => `${k}=${value}`)
            .join(' ')}`,
        ]
      : []),
    `  started ${r.createdAt}${r.endedAt ? `, took ${seconds(r.durationMs)}` : ''}`,
  ];
  if (r.error) lines.push(`  error: ${r.error.code}: ${r.error.message}`);
  if (r.usage) lines.push(`  usage: ${r.usage.inputTokens} in, ${r.usage.outputTokens} out${r.usage.costUsd === undefined ? '' : `, $${r.usage.costUsd}`}`);
  if (r.lastMessage) lines.push(`  last message: ${r.lastMessage}`);
  if (r.result !== undefined) lines.push(`  result: ${JSON.stringify(r.result)}`);
  if (r.changes) {
    const n = r.changes.files.length;
    lines.push(`  changes: ${n} file${n === 1 ? '' : 's'} on ${r.changes.branch}${r.changes.worktree ? ` (worktree ${r.changes.worktree})` : ''}`);
  }
  if (r.publish) lines.push(`  publish: ${publishLine(r.publish)}`);
  if (r.verify) {
    const last = r.verify.attempts.at(-1);
    const failing = last?.checks.filter((c) => !c.passed).map((c) => c.name) ?? [];
    const n = r.verify.attempts.length;
    lines.push(`  verify: ${r.verify.verdict} after ${n} attempt${n === 1 ? '' : 's'}${failing.length > 0 ? ` (failing: ${failing.join(', ')})` : ''}`);
  }
  for (const w of r.webhooks ?? []) lines.push(`  webhook ${w.event} → ${w.url}: ${w.state} (${w.attempts} attempts)`);
  return lines.join('\n');
}

/** What one event says, by its type; a type not listed shows its Session. */
const WHAT: Partial<Record<RunEvent['type'], (data: Record<string, unknown>) => string>> = {
  message: (d) => String(d.text),
  tool: (d) => `${String(d.name)} ${String(d.status)}`,
  usage: (d) => `${String(d.inputTokens)} in, ${String(d.outputTokens)} out`,
  error: (d) => String(d.message),
  'run.ended': (d) => String(d.status),
  'run.started': (d) => `${String(d.agent)} in ${String(d.workspaceId)}`,
  'verify.checked': (d) => `${String(d.name)} ${d.passed ? 'passed' : d.timedOut ? 'timed out' : `failed (exit ${String(d.exitCode)})`}`,
  'verify.verdict': (d) => `attempt ${String(d.attempt)}: ${String(d.verdict)}`,
};

export function describeEvent(e: RunEvent): string {
  const time = e.time.slice(11, 19);
  const data = e.data as Record<string, unknown>;
  const what = WHAT[e.type]?.(data) ?? String(data.resumeId ?? '');
  return `${time} ${e.type.padEnd(13)} ${what.replace(/\s+/g, ' ').slice(0, 200)}`;
}

/** What became of a run's publishing, in one line. */
function publishLine(p: NonNullable<RunRecord['publish']>): string {
  const pushed = p.pushed ? `pushed ${p.pushed.branch} to ${p.pushed.remote}` : undefined;
  const pr = p.pullRequest ? `${p.pullRequest.draft ? 'draft ' : ''}pull request ${p.pullRequest.url}` : undefined;
  const error = p.error ? `${p.error.code}: ${p.error.message}` : undefined;
  return [pushed, pr, error, p.skipped && `not published: ${p.skipped}`].filter((part) => part !== undefined).join('; ');
}
