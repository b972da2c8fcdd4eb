import { pino, type Logger, type DestinationStream } from 'pino';
import { escapeJsonControls } from './escape.js';

export type { Logger };

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * JSON lines (pino). Secrets never reach a log line: we log no request headers, and these paths
 * are censored in case an object holding them is ever logged by mistake. Every line leaves with
 * no raw control character (core/escape.ts), whatever client text it holds: the foreground proxy
 * writes it to a terminal.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      hooks: { streamWrite: escapeJsonControls },
      redact: {
        paths: ['token', '*.token', 'authorization', '*.authorization', 'headers.authorization', '*.headers.authorization', 'password', '*.password', 'key', '*.key'],
        censor: '[redacted]',
      },
    },
    destination ?? pino.destination({ fd: 2, sync: false }),
  );
}
