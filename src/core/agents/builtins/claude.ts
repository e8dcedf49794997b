import { claudeStyleParser } from '../parsing/claude-stream';
import { agent, asRoot, resumeFlag } from './define';

export const claude = agent('claude', {
  identity: { args: ['--version'], pattern: /Claude Code/ },
  credentials: {
    env: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX'],
    files: ['.claude/.credentials.json'],
  },
  run: (input) => ({
    // stream-json requires --verbose in print mode; the prompt comes on stdin.
    args: ['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions', ...resumeFlag('--resume', input)],
    stdin: input.prompt,
    // As root, Claude Code refuses bypass mode unless it is told it runs in a sandbox.
    ...(asRoot ? { env: { IS_SANDBOX: '1' } } : {}),
  }),
  parser: claudeStyleParser,
});
