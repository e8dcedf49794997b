import { claudeStyleParser } from '../parsing/claude-stream';
import { agent, byPermissions, resumeFlag } from './define';

export const cursor = agent('cursor', {
  command: 'cursor-agent',
  credentials: { env: ['CURSOR_API_KEY'], files: ['.cursor/cli-config.json'] },
  // Read-only: without --force, print mode denies every tool call that would ask.
  readOnly: true,
  stateDirs: ['.cursor', '.config/cursor'],
  config: ['.cursor/mcp.json', '.cursor/rules'],
  run: (input) => ({
    args: ['-p', '--output-format', 'stream-json', ...byPermissions(input, ['--force'], []), '--trust', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});
