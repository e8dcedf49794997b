/**
 * @module A verify loop's rubric grader (docs/verify.md: A rubric grader): a run of its own,
 * started through the run starter like any other, in the worker's workspace, read-only and in the
 * worker's sandbox where it has one, that sees only what it is given (the rubric and the change)
 * and must answer through structured output. Its record is listed as any run's, named for the run
 * it grades.
 */
import type { RunError, RunStatus } from '../../contract/records';
import type { StoredRun, Workspace } from '../types';
import type { RunStarter } from './run-starter';

/** What a grader is asked. */
export interface GradeRequest {
  prompt: string;
  agent?: string;
  timeoutMs: number;
  outputSchema: Record<string, unknown>;
}

/** How its run ended: its answer, where it gave one that matched. */
export interface GradeAnswer {
  taskId: string;
  status: RunStatus;
  result?: unknown;
  error?: RunError;
}

/** The run a grader grades: where it runs, and what its agent may reach. */
export interface GradedRun {
  workspace: Workspace;
  record: StoredRun;
  apiUrl: string;
}

export interface RunGrader {
  /** Starts the grader and waits for its end; a stop of the graded run (`signal`) cancels it. Throws what its start was refused with. */
  grade(graded: GradedRun, request: GradeRequest, signal: AbortSignal): Promise<GradeAnswer>;
}

export function runGrader(runs: () => RunStarter): RunGrader {
  return {
    async grade({ workspace, record, apiUrl }, request, signal) {
      // The workspace's own checks and answer shape are the worker's, never its grader's.
      const { verify: _, outputSchema: __, ...defaults } = workspace.run ?? {};
      const spec = {
        permissions: 'read-only' as const,
        ...(record.policy?.sandbox ? { sandbox: true } : {}),
        ...(request.agent ? { agent: request.agent } : {}),
        timeoutMs: request.timeoutMs,
        outputSchema: request.outputSchema,
        title: `grader of ${record.title ?? record.taskId}`.slice(0, 200),
        metadata: { 'verify.grades': record.taskId },
      };
      const started = await runs().start({ workspace: { ...workspace, run: defaults }, request: { prompt: request.prompt, wait: false, ...spec }, apiUrl });
      const taskId = started.record.taskId;
      const cancel = () =>
        void runs()
          .cancel(taskId)
          .catch(() => undefined);
      signal.addEventListener('abort', cancel, { once: true });
      try {
        const { record: ended } = await started.done;
        return {
          taskId,
          status: ended.status,
          ...(ended.result === undefined ? {} : { result: ended.result }),
          ...(ended.error ? { error: ended.error } : {}),
        };
      } finally {
        signal.removeEventListener('abort', cancel);
      }
    },
  };
}
