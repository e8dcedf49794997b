import type { HeadlessLogger } from '../logger';
import type { ServiceObserver } from './observer';

/** The run lines of the logs (docs/deployment.md: Logs): never the prompt, the output or a token. */
export function logObserver(logger: HeadlessLogger): ServiceObserver {
  return {
    runStarted: ({ taskId, workspaceId, agent, mode, resumeId, schedule }) =>
      logger.info({ taskId, workspaceId, agent, mode, resumeId, ...(schedule ? { schedule } : {}) }, 'run started'),
    runEnded: ({ taskId, workspaceId, agent, status, durationMs, exitCode, error, schedule }) =>
      logger.info(
        { taskId, workspaceId, agent, status, durationMs, exitCode, ...(error ? { error: error.code } : {}), ...(schedule ? { schedule } : {}) },
        'run ended',
      ),
    deliveryAttempted: () => undefined,
    // The scheduler logs its firings itself, with the occurrence.
    scheduleFired: () => undefined,
    // The trigger service logs each delivery itself, with its id.
    triggerDelivered: () => undefined,
  };
}
