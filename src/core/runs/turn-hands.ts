/**
 * @module What a turn policy may do for its run between turns (runs/turn-policy.ts `TurnContext`):
 * run a command as the run's agent runs (confined-command.ts), note what it found on the running
 * record, take the callers' follow-ups, add its events to the timeline.
 */
import { shownText } from '../util/text';
import { redactValue } from './run-secrets';
import type { RunEvents } from '../events/run-events';
import { runConfined } from './confined-command';
import { timedOut } from './guards';
import type { RunLifecycle } from './lifecycle';
import type { LiveRun } from './live-run';
import { STOPS } from './outcome';
import type { TurnInput } from './turn-policy';

export type TurnHands = Pick<TurnInput, 'run' | 'note' | 'event' | 'takeFollowUps'>;

/** `open`: its session is still open (ACP), its agent alive beside what a policy runs. */
export function turnHands($: { lifecycle: RunLifecycle; events: RunEvents }, a: { live: LiveRun; owner: string; open: boolean }): TurnHands {
  const { live, owner, open } = a;
  const { taskId } = live;
  return {
    run: async (command, signal) => {
      const { placed, confined } = live;
      if (!placed || !confined) throw new Error(`${taskId} has no placement to run ${command.what} in`);
      const stopOnAbort = () => live.beside?.stop(timedOut(command.timeoutMs), 0);
      signal.addEventListener('abort', stopOnAbort, { once: true });
      try {
        const end = await runConfined({
          ...command,
          ...confined,
          cwd: placed.cwd,
          host: placed.host,
          // Its session open (ACP), the agent lives on beside the command: only the command's own group goes at its end.
          leftovers: open ? 'group' : 'run',
          run: { taskId, data: placed.data },
          // A stop that came as it was starting stops it at once.
          started: (proc) => {
            live.beside = proc;
            if (live.pendingStop || live.halt.signal.aborted) proc.stop(STOPS[live.pendingStop ?? 'cancel'], 0);
          },
        });
        const timedOutHere = end.stopped?.reason === 'timeout' && !signal.aborted;
        // What a command prints may end up on the record (a check's output): never the run's token or secrets.
        const token = confined.env.HEADLESS_RUN_TOKEN;
        // With its secrets, what would not show goes first: an escape inside a value must not hide it.
        const hide = (text: string) => {
          if (!live.redact) return token ? text.split(token).join('[the run token]') : text;
          return live.redact(shownText(token ? text.split(token).join('[the run token]') : text), end.truncated);
        };
        return { ...end, stdout: hide(end.stdout), stderr: hide(end.stderr), timedOut: timedOutHere, stopped: end.stopped !== undefined && !timedOutHere };
      } finally {
        live.beside = undefined;
        signal.removeEventListener('abort', stopOnAbort);
      }
    },
    // What a policy notes and tells may quote what the agent wrote (a grader's explanation): without the run's secrets.
    note: (notes) => $.lifecycle.noteTurn(taskId, owner, redactValue(notes, live.redact)),
    takeFollowUps: () => live.followUps.splice(0),
    event: (type, data) => void $.events.append(taskId, type, redactValue(data, live.redact) as never),
  };
}
