import type { RunError } from '../../contract/records';
import type { AgentOutputParser, AgentVerdict } from '../agents/types';
import type { ProcessOutput } from '../process/spawner';
import type { SessionBook } from '../sessions';
import type { StoredRun } from '../types';
import { clip } from '../util/text';
import { judgeOutcome } from './outcome';
import type { ProcessEnd, SupervisedProcess } from './supervisor';

const LAST_MESSAGE_MAX = 4000;

/** How a run's process ended, as the final record needs it. */
export interface EndInput {
  exitCode: number | null;
  signal: string | null;
  output: ProcessOutput;
  runtimeError?: RunError;
}

export const emptyEnd: EndInput = { exitCode: null, signal: null, output: { stdout: '', stderr: '', truncated: false } };

export function processOutcome(end: ProcessEnd): EndInput {
  return {
    exitCode: end.exitCode,
    signal: end.signal,
    output: { stdout: end.stdout, stderr: end.stderr, truncated: end.truncated },
    ...(end.lost === undefined ? {} : { runtimeError: { code: 'process_lost', message: 'The service lost track of the agent process.' } }),
  };
}

/** The fields a run's final record sets, judged from its end and its agent's verdict. */
export function finalChange(a: {
  live: { parser: AgentOutputParser; process?: SupervisedProcess; reservation: { adapter: { name: string } }; taskId: string };
  end: EndInput;
  record: StoredRun;
  log: (message: string, error?: unknown) => void;
}) {
  const { live, end, record } = a;
  const verdict = verdictOf(live, end.exitCode, a.log);
  const outcome = judgeOutcome({
    exitCode: end.exitCode,
    signal: end.signal,
    stopReason: live.process?.stopReason,
    runtimeError: end.runtimeError,
    agentError: verdict.error,
    stderr: end.output.stderr,
    timeoutMs: record.timeoutMs,
  });
  const endedAt = new Date();
  const fields = {
    status: outcome.status,
    endedAt: endedAt.toISOString(),
    durationMs: Math.max(0, endedAt.getTime() - Date.parse(record.createdAt)),
    exitCode: end.exitCode,
    signal: end.signal,
    ...(outcome.error ? { error: outcome.error } : {}),
    ...(verdict.usage ? { usage: verdict.usage } : {}),
    ...(verdict.lastMessage ? { lastMessage: clip(verdict.lastMessage, LAST_MESSAGE_MAX) } : {}),
  };
  // The agent failed before its model ever answered: its session may not exist.
  const failedUnanswered = outcome.status === 'failed' && verdict.answered === false;
  return { fields, failedUnanswered, agentSessionId: verdict.agentSessionId ?? record.agentSessionId };
}

/** The parser's verdict; a parser that throws (a custom adapter's) makes the run failed, never stuck. */
function verdictOf(live: Parameters<typeof finalChange>[0]['live'], exitCode: number | null, log: (m: string, e?: unknown) => void): AgentVerdict {
  try {
    return live.parser.finish(exitCode);
  } catch (error) {
    log(`the ${live.reservation.adapter.name} adapter could not judge ${live.taskId}`, error);
    return { error: 'the agent adapter could not read the output' };
  }
}

/**
 * Settles the Session as the run ends, before its record does, so whoever sees the run ended sees
 * its Session as it is now: a run that failed before its model answered leaves the agent session
 * id it had before (`reset`), any other notes the one it printed.
 */
export async function settleSession(sessions: SessionBook, resumeId: string, how: { reset: string | undefined } | { note: string | undefined }): Promise<void> {
  if ('reset' in how) await sessions.setAgentSessionId(resumeId, how.reset);
  else await sessions.noteAgentSessionId(resumeId, how.note);
}
