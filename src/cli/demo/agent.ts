import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentAdapter, AgentEvent } from '../../core/agents/types';

/**
 * The adapter of the demo agent (demo/program.ts, built as `dist/demo-agent.js`): run with this
 * Node, the prompt on stdin, its stdout one AgentEvent per line. It resumes trivially: its
 * session is the Session.
 */
export function demoAgent(): AgentAdapter {
  const program = join(dirname(fileURLToPath(import.meta.url)), 'demo-agent.js');
  if (!existsSync(program)) throw new Error(`the demo agent is not built (${program} is missing): run npm run build`);
  return {
    name: 'demo',
    kind: 'agent',
    command: process.execPath,
    supportsResume: true,
    invocation: (input) => ({ command: process.execPath, args: [program], stdin: input.prompt }),
    parser(input) {
      let lastMessage: string | undefined;
      let error: string | undefined;
      return {
        line(line) {
          const event = readEvent(line);
          if (event?.type === 'message') lastMessage = event.text;
          if (event?.type === 'error') error = event.message;
          return event ? [event] : [];
        },
        sessionId: () => input.resumeId,
        finish: (exitCode) => ({
          agentSessionId: input.resumeId,
          answered: true,
          lastMessage,
          ...(exitCode === 0 ? {} : { error: error ?? 'the demo agent failed' }),
        }),
      };
    },
  };
}

function readEvent(line: string): AgentEvent | undefined {
  try {
    const event = JSON.parse(line) as AgentEvent;
    return ['message', 'tool', 'error'].includes(event?.type) ? event : undefined;
  } catch {
    return undefined;
  }
}
