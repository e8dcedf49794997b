import { claudeStyleParser } from '../parsing/claude-stream';
import { agent, resumeFlag } from './define';

export const qwen = agent('qwen', {
  credentials: { env: ['OPENAI_API_KEY', 'DASHSCOPE_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY'], files: ['.qwen/oauth_creds.json'] },
  run: (input) => ({
    // The prompt on stdin: `-p` is deprecated and a positional prompt could be read as an option.
    args: ['--output-format', 'stream-json', '--approval-mode', 'yolo', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});
