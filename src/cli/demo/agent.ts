import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentAdapter, AgentEvent, AgentOutputParser, AgentProtocol, AgentRunInput, PermissionQuestion } from '../../core/agents/types';

/**
 * The adapter of the demo agent (demo/program.ts, built as `dist/demo-agent.js`): run with this
 * Node, the prompt on stdin, its stdout one AgentEvent per line. It resumes trivially: its
 * session is the Session. Under `permissions: "ask"` it asks once, on a line of its own.
 */
export function demoAgent(): AgentAdapter {
  const program = join(dirname(fileURLToPath(import.meta.url)), 'demo-agent.js');
  if (!existsSync(program)) throw new Error(`the demo agent is not built (${program} is missing): run npm run build`);
  return {
    name: 'demo',
    kind: 'agent',
    command: process.execPath,
    supportsResume: true,
    invocation: (input) =>
      input.permissions === 'ask'
        ? { command: process.execPath, args: [program, '--ask'] }
        : { command: process.execPath, args: [program], stdin: input.prompt },
    parser: demoParser,
    asking: DEMO_ASKING,
  };
}

/** Under `ask`: its prompt as a first line, its question answered on the next, then stdin closes. */
const DEMO_ASKING: AgentProtocol = {
  name: 'demo-ask',
  talksBack: true,
  asks: true,
  open(io, input) {
    const read = demoParser(input);
    io.write(`${JSON.stringify({ prompt: input.prompt })}\n`);
    return {
      line(line) {
        const question = questionOf(line);
        if (!question) {
          for (const event of read.line(line) ?? []) io.emit(event);
          return;
        }
        void io.ask(question).then((decision) => {
          io.write(`${JSON.stringify({ allow: decision.allow })}\n`);
          io.end();
        });
      },
      sessionId: () => read.sessionId(),
      finish: (exitCode) => read.finish(exitCode),
    };
  },
};

function questionOf(line: string): PermissionQuestion | undefined {
  try {
    const event = JSON.parse(line) as { type?: string; title?: string; kind?: string; paths?: string[] };
    return event.type === 'permission' ? { title: String(event.title), kind: String(event.kind), paths: event.paths ?? [], canAlways: false } : undefined;
  } catch {
    return undefined;
  }
}

function demoParser(input: AgentRunInput): AgentOutputParser {
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
}

function readEvent(line: string): AgentEvent | undefined {
  try {
    const event = JSON.parse(line) as AgentEvent;
    return ['message', 'tool', 'error'].includes(event?.type) ? event : undefined;
  } catch {
    return undefined;
  }
}
