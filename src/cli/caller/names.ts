/** The caller commands' names: what the command line routes to the caller (caller/index.ts), known without loading it. */
export const CALLER_COMMANDS = [
  'run',
  'status',
  'follow',
  'logs',
  'changes',
  'list',
  'cancel',
  'message',
  'inbox',
  'approvals',
  'approve',
  'deny',
  'sessions',
  'schedules',
  'triggers',
  'usage',
] as const;
export type CallerName = (typeof CALLER_COMMANDS)[number];
