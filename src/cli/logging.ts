import pino from 'pino';

/**
 * The daemon's logger (docs/deployment.md: Logs): pino, on stderr (stdout carries only the
 * `listening on` line). JSON, one object per line, when stderr is not a terminal (systemd, a
 * container); readable lines when it is.
 */

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export async function daemonLogger(level: LogLevel): Promise<pino.Logger> {
  const options: pino.LoggerOptions = { level, base: { pid: process.pid }, serializers: { err: pino.stdSerializers.err } };
  if (!process.stderr.isTTY) return pino(options, pino.destination({ fd: 2, sync: true }));
  // Loaded only for a terminal: a service under systemd or in a container never needs it.
  const { default: pretty } = await import('pino-pretty');
  return pino(options, pretty({ destination: 2, sync: true, colorize: true, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss' }));
}
