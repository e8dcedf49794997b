import { claudeStyleParser } from '../parsing/claude-stream';
import { claudeControlProtocol } from '../protocols/claude-control';
import { agent, asRoot, byPermissions, resumeFlag } from './define';

/** Claude Code's tools that edit files or run commands. */
const CHANGING_TOOLS = 'Bash,Edit,MultiEdit,Write,NotebookEdit,KillShell';

export const claude = agent('claude', {
  identity: { args: ['--version'], pattern: /Claude Code/ },
  credentials: {
    env: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX'],
    files: ['.claude/.credentials.json'],
  },
  readOnly: true,
  structuredOutput: 'native',
  // Accepted in print mode, though its usage does not list it (the real-CLI tier runs with it).
  unlistedFlags: ['--max-turns'],
  // Not ~/.claude.json: it holds MCP servers and is rewritten at every start, so a sandbox starts without one.
  // Its transcripts only (an allow list): the rest of ~/.claude starts empty at every run, so nothing else a run writes there reaches the next.
  stateDirs: ['.claude/projects', '.config/claude/projects'],
  config: [
    '.claude/settings.json',
    '.claude/settings.local.json',
    '.claude/CLAUDE.md',
    '.claude/hooks',
    '.claude/plugins',
    '.claude/commands',
    '.claude/agents',
    '.claude/skills',
  ],
  run: (input) => ({
    // stream-json requires --verbose in print mode; the prompt comes on stdin. Read-only: the
    // tools that change anything are removed, and print mode denies whatever else would ask.
    // Ask: the prompt and the answers to its questions come on stdin (protocols/claude-control.ts).
    args: [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      // Read-only: the workspace's own settings (their hooks run commands) are not loaded either.
      ...(input.permissions === 'ask'
        ? ['--input-format', 'stream-json', '--permission-prompt-tool', 'stdio', '--permission-mode', 'default']
        : byPermissions(
            input,
            ['--dangerously-skip-permissions'],
            ['--permission-mode', 'default', `--disallowedTools=${CHANGING_TOOLS}`, '--setting-sources', 'user'],
          )),
      ...resumeFlag('--resume', input),
      // The budget's limits Claude Code enforces itself (the service watches every limit too).
      ...(input.budget?.maxTurns === undefined ? [] : ['--max-turns', String(input.budget.maxTurns)]),
      ...(input.budget?.maxCostUsd === undefined ? [] : ['--max-budget-usd', String(input.budget.maxCostUsd)]),
      // Its answer comes back as the result's `structured_output`.
      ...(input.outputSchema === undefined ? [] : ['--json-schema', JSON.stringify(input.outputSchema.schema)]),
    ],
    ...(input.permissions === 'ask' ? {} : { stdin: input.prompt }),
    // As root, Claude Code refuses bypass mode unless it is told it runs in a sandbox.
    ...(asRoot && input.permissions === 'full' ? { env: { IS_SANDBOX: '1' } } : {}),
  }),
  parser: claudeStyleParser,
  asking: claudeControlProtocol(claudeStyleParser),
});
