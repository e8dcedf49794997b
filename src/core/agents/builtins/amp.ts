import { claudeStyleParser } from '../parsing/claude-stream';
import { agent } from './define';

export const amp = agent('amp', {
  // Without credentials amp prints a login prompt and waits forever, even with stdin closed.
  credentials: { env: ['AMP_API_KEY'], files: ['.local/share/amp/secrets.json'], required: true },
  // Accepted (amp refuses unknown options) but missing from `amp --help`.
  unlistedFlags: ['--dangerously-allow-all'],
  // No read-only mode on its command line: a read-only workspace runs amp only in a sandbox.
  stateDirs: ['.local/share/amp', '.config/amp', '.cache/amp'],
  config: ['.config/amp/settings.json', '.config/amp/AGENTS.md'],
  run: (input) => ({
    args: [
      ...(input.agentSessionId === undefined ? [] : ['threads', 'continue', input.agentSessionId]),
      '--execute',
      '--stream-json',
      '--dangerously-allow-all',
    ],
    stdin: input.prompt,
    // With TERM set, amp writes terminal control sequences into its pipes.
    env: { TERM: 'dumb' },
  }),
  parser: claudeStyleParser,
});
