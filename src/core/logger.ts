/**
 * What the service logs through (docs/deployment.md: Logs). Its shape is pino's, so a pino logger
 * (or anything with these three methods) can be passed as the `logger` option; the daemon passes
 * pino. Fields are never secrets, tokens or prompts.
 */
export interface HeadlessLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** How the units report a failure they handled: a message and the error, if any. */
export type Log = (message: string, error?: unknown) => void;

export const errorLog =
  (logger: HeadlessLogger): Log =>
  (message, error) =>
    logger.error(error === undefined ? {} : { err: error }, message);

/** The library's default: errors and warnings on stderr, nothing else (an embedding host owns its output). */
export const consoleLogger: HeadlessLogger = {
  info: () => undefined,
  warn: (_, message) => console.error(`[headless-run-webhook] ${message}`),
  error: (fields, message) => {
    const error = fields.err;
    console.error(`[headless-run-webhook] ${message}${error instanceof Error ? `: ${error.message}` : ''}`);
  },
};
