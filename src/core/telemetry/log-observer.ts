import type { HeadlessLogger } from '../logger';
import type { ServiceSubscriber } from './observer';

/**
 * The run lines of the logs (docs/deployment.md: Logs): never the prompt, the output or a token.
 * Schedules and triggers log their firings and deliveries themselves, with the occurrence or the delivery's id.
 */
export function logObserver(logger: HeadlessLogger): ServiceSubscriber {
  return {
    runStarted: ({ taskId, workspaceId, agent, mode, resumeId, schedule }) =>
      logger.info({ taskId, workspaceId, agent, mode, resumeId, ...(schedule ? { schedule } : {}) }, 'run started'),
    runEnded: ({ taskId, workspaceId, agent, status, durationMs, exitCode, error, schedule }) =>
      logger.info(
        { taskId, workspaceId, agent, status, durationMs, exitCode, ...(error ? { error: error.code } : {}), ...(schedule ? { schedule } : {}) },
        'run ended',
      ),
  };
}
