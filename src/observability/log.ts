import { pino, type DestinationStream, type Logger } from 'pino';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/**
 * JSON logs, one line per meaningful step. Credentials travel as SecretValue and
 * print as "[redacted]"; the redact paths are a second guard for anything that
 * slips into a log object under a telling name.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { component: 'usergroup-operator' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'token',
          'apiKey',
          'api_key',
          'current_token',
          'authorization',
          'Authorization',
          '*.token',
          '*.apiKey',
          '*.current_token',
          '*.authorization',
          '*.Authorization',
          'headers.authorization',
        ],
        censor: '[redacted]',
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
