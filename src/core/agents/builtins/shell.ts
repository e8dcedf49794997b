import type { AgentAdapter } from '../types';

/** Exists so that naming it gives a clear 400: a shell has no model loop. */
export const shell: AgentAdapter = {
  name: 'shell',
  kind: 'shell',
  command: 'sh',
  supportsResume: false,
  invocation: () => {
    throw new Error('the shell adapter never runs headless');
  },
  parser: () => ({ line: () => undefined, sessionId: () => undefined, finish: () => ({}) }),
};
