/**
 * @module Claude Code under `permissions: "ask"` (docs/approvals.md): started with
 * `--input-format stream-json --permission-prompt-tool stdio`, it is given its prompt as a user
 * message on stdin, and asks before each tool its settings do not allow with a `control_request`
 * (`can_use_tool`) on stdout, waiting for the `control_response` on stdin (the channel Claude's
 * Agent SDK uses). Every other line is read by its usual parser; its `result` ends the turn, so
 * stdin is closed then.
 */
import type { AgentAdapter, AgentIO, AgentProtocol, AgentRunInput, PermissionQuestion } from '../types';

interface CanUseTool {
  request_id: string;
  request: { subtype: 'can_use_tool'; tool_name: string; input?: Record<string, unknown>; description?: string };
}

/** Claude Code's tools by the kinds ACP names. */
const KINDS: Record<string, string> = {
  Write: 'edit',
  Edit: 'edit',
  MultiEdit: 'edit',
  NotebookEdit: 'edit',
  Bash: 'execute',
  KillShell: 'execute',
  Read: 'read',
  Glob: 'search',
  Grep: 'search',
  WebFetch: 'fetch',
  WebSearch: 'fetch',
};

export function claudeControlProtocol(parser: AgentAdapter['parser']): AgentProtocol {
  return {
    name: 'claude-control',
    talksBack: true,
    asks: true,
    open(io: AgentIO, input: AgentRunInput) {
      const read = parser(input);
      const send = (message: unknown) => io.write(`${JSON.stringify(message)}\n`);
      send({ type: 'user', message: { role: 'user', content: [{ type: 'text', text: input.prompt }] } });
      return {
        line(line) {
          const message = parse(line);
          if (isCanUseTool(message)) return void answer(message);
          for (const event of read.line(line) ?? []) io.emit(event);
          if (message?.type === 'result') io.end();
        },
        sessionId: () => read.sessionId(),
        finish: (exitCode) => read.finish(exitCode),
      };

      async function answer({ request_id, request }: CanUseTool): Promise<void> {
        // A question that cannot be asked is refused: Claude Code waits for every answer.
        const decision = await io.ask(question(request)).catch(() => ({ allow: false, always: false }));
        const response = decision.allow
          ? { behavior: 'allow', updatedInput: request.input ?? {} }
          : { behavior: 'deny', message: 'The service refused this (docs/approvals.md).' };
        send({ type: 'control_response', response: { subtype: 'success', request_id, response } });
      }
    },
  };
}

/** What a human is shown: the tool, and what it works on (a file, or the command it runs). */
function question(request: CanUseTool['request']): PermissionQuestion {
  const input = request.input ?? {};
  const path = [input.file_path, input.notebook_path, input.path].find((p): p is string => typeof p === 'string');
  const detail = typeof input.command === 'string' ? input.command : (request.description ?? path);
  const kind = KINDS[request.tool_name];
  return {
    title: detail ? `${request.tool_name}: ${detail}` : request.tool_name,
    ...(kind ? { kind } : {}),
    paths: path ? [path] : [],
    canAlways: false,
    input,
  };
}

function parse(line: string): { type?: unknown; request?: { subtype?: unknown } } | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as { type?: unknown };
  } catch {
    return undefined;
  }
}

const isCanUseTool = (m: ReturnType<typeof parse>): m is CanUseTool & { type: 'control_request' } =>
  m?.type === 'control_request' && m.request?.subtype === 'can_use_tool';
