import { claudeStyleParser } from '../parsing/claude-stream';
import { agent, byPermissions, resumeFlag } from './define';

export const qwen = agent('qwen', {
  credentials: { env: ['OPENAI_API_KEY', 'DASHSCOPE_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY'], files: ['.qwen/oauth_creds.json'] },
  // Read-only as gemini's (qwen is its fork): the default approval mode.
  readOnly: true,
  structuredOutput: 'native',
  // Its chats only (~/.qwen/projects/<project>/chats, and its temporary project folders): a planted ~/.qwen/.env is gone at the next run.
  stateDirs: ['.qwen/projects', '.qwen/tmp'],
  config: ['.qwen/settings.json', '.qwen/QWEN.md', '.qwen/extensions', '.qwen/commands'],
  run: (input) => ({
    // The prompt on stdin: `-p` is deprecated and a positional prompt could be read as an option.
    args: [
      '--output-format',
      'stream-json',
      '--approval-mode',
      byPermissions(input, 'yolo', 'default'),
      ...resumeFlag('--resume', input),
      // Its answer comes back as the result's `structured_result`; plain text instead is exit 1.
      ...(input.outputSchema === undefined ? [] : ['--json-schema', JSON.stringify(input.outputSchema.schema)]),
    ],
    stdin: input.prompt,
  }),
  parser: claudeStyleParser,
});
