import pino from 'pino';
import pretty from 'pino-pretty';

/**
 * The daemon's logger (docs/deployment.md: Logs): pino, on stderr (stdout carries only the
 * `listening on` line). JSON, one object per line, when stderr is not a terminal (systemd, a
 * container); readable lines when it is.
 */

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function daemonLogger(level: LogLevel): pino.Logger {
  const options: pino.LoggerOptions = { level, base: { pid: process.pid }, serializers: { err: pino.stdSerializers.err } };
  if (!process.stderr.isTTY) return pino(options, pino.destination({ fd: 2, sync: true }));
  return pino(options, pretty({ destination: 2, sync: true, colorize: true, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss' }));
}
