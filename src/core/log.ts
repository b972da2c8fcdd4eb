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
        paths: [
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'headers.authorization',
          '*.headers.authorization',
          'password',
          '*.password',
          'key',
          '*.key',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? stderrStream(),
  );
}

/**
 * pino's stream to stderr. A reader that is gone or has stopped reading must never keep the proxy
 * from stopping. sonic-boom 4 (pino's) retries a failed write for ever in its flushSync — which
 * pino calls at exit and after a fatal line — in a sleep loop that also keeps signals from being
 * handled: the process hung at exit, holding its ports, after a closed terminal's EIO, on a pipe
 * whose reader had gone (EPIPE) and on one whose reader had stopped reading (EAGAIN).
 *  - A terminal is written synchronously, as Node writes process.stderr to one (nothing is left for
 *    flushSync), and given up on its first write error.
 *  - Anything else (a pipe, a socket, a file) is written through Node's process.stderr, which has
 *    no flushSync: a pipe is written at once when it has room and queued otherwise (a slow reader
 *    does not stall the proxy) up to STDERR_QUEUE_MAX, beyond which lines are counted and
 *    dropped; nothing queued is waited for at exit, and the first error (EPIPE) drops the log.
 *    flush() waits for the queue to drain, at most FLUSH_WAIT_MS: the last lines reach a reader
 *    that reads, and one that stopped does not hold the exit.
 */
export function stderrStream(render: RenderRecord = jsonLine): DestinationStream {
  return process.stderr.isTTY === true ? terminalStream() : processStderr(render);
}

/** A record as the stream's reader sees it: a JSON line, or what --log-format pretty makes of it. */
export type RenderRecord = (record: Record<string, unknown>) => string;
const jsonLine: RenderRecord = (record) => `${JSON.stringify(record)}\n`;

/** How long flush() waits for lines still queued for stderr's reader. */
const FLUSH_WAIT_MS = 1_000;

function terminalStream(): DestinationStream {
  const dest = pino.destination({ fd: 2, sync: true });
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

let stderrFailed = false;
let watchingStderr = false;
/** Bytes queued for stderr's reader beyond which lines are dropped (and counted). */
const STDERR_QUEUE_MAX = 1 << 20;
let droppedLines = 0;

/** A pino-shaped warning with the count of lines dropped while stderr's reader fell behind. */
function reportDropped(render: RenderRecord): void {
  const count = droppedLines;
  droppedLines = 0;
  if (count === 0 || stderrFailed) return;
  process.stderr.write(render({ level: 40, time: Date.now(), pid: process.pid, dropped: count, msg: "log lines dropped: stderr's reader did not keep up" }));
}

function processStderr(render: RenderRecord): DestinationStream & { flush(cb?: () => void): void } {
  const stderr = process.stderr;
  if (!watchingStderr) {
    // One listener for every logger; `on`, not `once`: Node's stdio streams come back after an
    // error (they are never destroyed), so a later write can fail again.
    watchingStderr = true;
    stderr.on('error', () => {
      stderrFailed = true;
    });
  }
  return {
    write(line: string) {
      if (stderrFailed) return;
      // A reader that stopped reading (a paused pager): lines beyond the bound are counted, not
      // queued without end, and the count is said once the reader catches up.
      if (stderr.writableLength >= STDERR_QUEUE_MAX) {
        if (droppedLines++ === 0) stderr.once('drain', () => reportDropped(render));
        return;
      }
      stderr.write(line);
    },
    flush(cb?: () => void) {
      if (stderrFailed || stderr.writableLength === 0) return void cb?.();
      const finish = () => {
        clearTimeout(timer);
        stderr.off('drain', drained);
        stderr.off('close', finish);
        cb?.();
      };
      // A drain listener that ran before this one may have written again (the count of dropped
      // lines): the exit waits for that too, within the same bound.
      const drained = () => {
        if (stderr.writableLength === 0 || stderrFailed) finish();
        else stderr.once('drain', drained);
      };
      const timer = setTimeout(finish, FLUSH_WAIT_MS);
      stderr.once('drain', drained);
      stderr.once('close', finish);
    },
  };
}
