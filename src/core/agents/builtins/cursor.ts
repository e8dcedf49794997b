import { claudeStyleParser } from '../parsing/claude-stream';
import { agent, resumeFlag } from './define';

export const cursor = agent('cursor', {
  command: 'cursor-agent',
  credentials: { env: ['CURSOR_API_KEY'], files: ['.cursor/cli-config.json'] },
  run: (input) => ({
    args: ['-p', '--output-format', 'stream-json', '--force', '--trust', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});
