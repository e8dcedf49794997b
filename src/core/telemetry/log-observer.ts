import type { HeadlessLogger } from '../logger';
import type { ServiceObserver } from './observer';

/** The run lines of the logs (docs/deployment.md: Logs): never the prompt, the output or a token. */
export function logObserver(logger: HeadlessLogger): ServiceObserver {
  return {
    runStarted: ({ taskId, workspaceId, agent, mode, resumeId }) => logger.info({ taskId, workspaceId, agent, mode, resumeId }, 'run started'),
    runEnded: ({ taskId, workspaceId, agent, status, durationMs, exitCode, error }) =>
      logger.info({ taskId, workspaceId, agent, status, durationMs, exitCode, ...(error ? { error: error.code } : {}) }, 'run ended'),
    deliveryAttempted: () => undefined,
  };
}
