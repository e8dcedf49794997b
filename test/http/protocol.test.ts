import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentAdapter, AgentProtocol } from '../../src/core/index';
import { closeAllHosts, createTestHost } from '../helpers/harness';

afterEach(closeAllHosts);

/** An agent that asks for its prompt on stdout, waits for the answer on stdin, then says hello. */
const ASKING = `
const rl = require('node:readline').createInterface({ input: process.stdin });
console.log(JSON.stringify({ ask: 'who?' }));
rl.on('line', (line) => { console.log(JSON.stringify({ said: 'hello ' + line })); process.exit(0); });
`;

/** A protocol double that talks back: it answers the agent's question with the prompt, over stdin. */
const talking: AgentProtocol = {
  name: 'talking',
  talksBack: true,
  asks: false,
  open(io, input) {
    let said: string | undefined;
    return {
      line(line) {
        const message = JSON.parse(line) as { ask?: string; said?: string };
        if (message.ask) io.write(`${input.prompt}\n`);
        if (message.said) {
          said = message.said;
          io.emit({ type: 'message', text: said });
        }
      },
      sessionId: () => undefined,
      finish: (exitCode) => ({ ...(said ? { lastMessage: said } : {}), ...(exitCode === 0 && said ? {} : { error: 'it never said hello' }) }),
    };
  },
};

const talker: AgentAdapter = {
  name: 'talker',
  kind: 'agent',
  command: process.execPath,
  supportsResume: false,
  invocation: () => ({ command: process.execPath, args: ['-e', ASKING] }),
  parser: () => {
    throw new Error('talker speaks its own protocol');
  },
  protocol: talking,
};

describe('an agent adapter is a command plus a protocol', () => {
  it('a protocol that talks back keeps the agent’s stdin open, answers it, and its events and verdict make the run', async () => {
    const host = await createTestHost({ agents: { talker }, workspaces: [{ id: 'talk', path: tmpdir(), agents: ['talker'] }] });
    const res = await host.request('POST', '/api/workspaces/talk/headless', { json: { prompt: 'world', agent: 'talker', wait: true } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { taskId: string; status: string; lastMessage?: string };
    expect(body).toMatchObject({ status: 'succeeded', lastMessage: 'hello world' });
    const events = (await (await host.request('GET', `/api/headless/${body.taskId}/events?format=json`)).json()) as {
      events: Array<{ type: string; data: unknown }>;
    };
    expect(events.events.filter((e) => e.type === 'message').map((e) => e.data)).toEqual([{ text: 'hello world' }]);
  });
});
