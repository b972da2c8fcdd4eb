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
    destination ?? stderrStream(),
  );
}

/**
 * pino's stream to stderr, given up on its first write error. A terminal closed under us answers
 * EIO (a closed pipe, EPIPE), and sonic-boom's flushSync — which pino calls at exit and after a
 * fatal line — retries every error but EAGAIN for ever, in a sleep loop that also keeps signals
 * from being handled: the proxy would hang, holding its ports. So a terminal is written
 * synchronously, as Node writes process.stderr to one (nothing is left for flushSync), and after
 * the first error the log is dropped and the proxy goes on (or stops when told). A pipe stays
 * asynchronous (a slow reader must not stall the proxy).
 */
export function stderrStream(): DestinationStream {
  const dest = pino.destination({ fd: 2, sync: process.stderr.isTTY === true });
  // `on`, not `once`: a later error with no listener would end the process.
  dest.on('error', () => {
    const gone = dest as unknown as Record<string, unknown>;
    gone.write = () => true;
    gone.flushSync = () => undefined;
    gone.flush = (cb?: (err?: Error) => void) => cb?.();
    gone.end = () => undefined;
  });
  return dest;
}
