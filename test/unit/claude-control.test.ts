import { describe, expect, it } from 'vitest';
import { claude } from '../../src/core/agents/builtins/claude';
import type { AgentEvent, AgentIO, PermissionQuestion } from '../../src/core/agents/types';

/**
 * Claude Code's control messages under `permissions: "ask"` (protocols/claude-control.ts), held to
 * what Claude Code 2.1 printed against the mock model (WRITE_FILE probe.txt, then the answer).
 */
const CAN_USE_TOOL = JSON.stringify({
  type: 'control_request',
  request_id: 'f0126f9b-8219-454a-a5cf-7401e821a148',
  request: {
    subtype: 'can_use_tool',
    tool_name: 'Write',
    display_name: 'Write',
    input: { file_path: '/tmp/ws/probe.txt', content: 'written by the agent\n' },
    description: 'probe.txt',
    permission_suggestions: [{ type: 'setMode', mode: 'acceptEdits', destination: 'session' }],
    tool_use_id: 'toolu_mock',
  },
});
const RESULT = JSON.stringify({
  type: 'result',
  subtype: 'success',
  is_error: false,
  result: 'MOCK REPLY 2',
  session_id: '948d2cb8-e354-4d17-96f2-1c937f3c32bd',
});

function conversation(allow: boolean) {
  const written: unknown[] = [];
  const asked: PermissionQuestion[] = [];
  const events: AgentEvent[] = [];
  let ended = false;
  const io: AgentIO = {
    write: (data) => void written.push(JSON.parse(data)),
    end: () => {
      ended = true;
    },
    emit: (event) => void events.push(event),
    ask: async (question) => {
      asked.push(question);
      return { allow, always: false };
    },
    next: async () => undefined,
  };
  const talk = claude.asking!.open(io, { prompt: 'WRITE_FILE probe.txt', workspacePath: '/tmp/ws', resumeId: 'ses_1', permissions: 'ask' });
  return { talk, written, asked, events, ended: () => ended };
}

describe('claude asks over its control messages', () => {
  it('its prompt is its first user message; its question is asked, named by tool and file; allowed, its input goes back as it was', async () => {
    const c = conversation(true);
    expect(c.written[0]).toEqual({ type: 'user', message: { role: 'user', content: [{ type: 'text', text: 'WRITE_FILE probe.txt' }] } });
    c.talk.line(CAN_USE_TOOL);
    await new Promise((resolve) => setImmediate(resolve));
    // The approver sees every argument of the call (docs/approvals.md), not only its title.
    expect(c.asked).toEqual([
      {
        title: 'Write: probe.txt',
        kind: 'edit',
        paths: ['/tmp/ws/probe.txt'],
        canAlways: false,
        input: { file_path: '/tmp/ws/probe.txt', content: 'written by the agent\n' },
      },
    ]);
    expect(c.written[1]).toEqual({
      type: 'control_response',
      response: {
        subtype: 'success',
        request_id: 'f0126f9b-8219-454a-a5cf-7401e821a148',
        response: { behavior: 'allow', updatedInput: { file_path: '/tmp/ws/probe.txt', content: 'written by the agent\n' } },
      },
    });
    expect(c.ended()).toBe(false);
    c.talk.line(RESULT);
    expect(c.ended()).toBe(true);
    expect(c.talk.finish(0)).toMatchObject({ agentSessionId: '948d2cb8-e354-4d17-96f2-1c937f3c32bd', lastMessage: 'MOCK REPLY 2' });
  });

  it('denied: a deny with a message the agent sees', async () => {
    const c = conversation(false);
    c.talk.line(CAN_USE_TOOL);
    await new Promise((resolve) => setImmediate(resolve));
    expect(c.written[1]).toMatchObject({ response: { response: { behavior: 'deny', message: expect.stringContaining('refused') } } });
  });
});
