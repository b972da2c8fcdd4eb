// Where the foreground proxy's log goes and in which shape. The records are always the ones pino
// writes (core/log.ts); in a terminal pino-pretty turns each into one short coloured line, and
// anywhere else (a pipe, a file, the tests' stderr parser) they stay JSON lines.
import type { DestinationStream } from 'pino';
import { prettyFactory } from 'pino-pretty';
import { escapeControls } from './escape.js';
import { stderrStream, type RenderRecord } from './log.js';

export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** `auto` is pretty exactly when the stream is a terminal. */
export function resolveLogFormat(format: LogFormat, stream: { isTTY?: boolean } = process.stderr): 'json' | 'pretty' {
  if (format !== 'auto') return format;
  return stream.isTTY === true ? 'pretty' : 'json';
}

interface Sink {
  write(text: string): unknown;
  flush?(cb?: (err?: Error | null) => void): void;
}

/**
 * A pino destination that prints each JSON line through pino-pretty. The line is parsed back and
 * every string in it escaped (core/escape.ts) before pino-pretty sees it: JSON kept a client's
 * ESC or 8-bit CSI as `\u001b`/`\u009b`, but parsing turns them back into raw controls, which
 * must not reach the terminal. Colour comes from pino-pretty itself (NO_COLOR/FORCE_COLOR obeyed).
 */
export function prettyDestination(sink: Sink, opts: { colorize?: boolean } = {}): DestinationStream & { flush(cb?: (err?: Error | null) => void): void } {
  const prettify = prettyRenderer(opts);
  return {
    write(line: string) {
      let record: unknown;
      try {
        record = JSON.parse(line, (_key, value: unknown) => (typeof value === 'string' ? escapeControls(value) : value));
      } catch {
        sink.write(escapeControls(line.trimEnd()) + '\n');
        return;
      }
      sink.write(prettify(record as Record<string, unknown>));
    },
    flush(cb?: (err?: Error | null) => void) {
      if (sink.flush) sink.flush(cb);
      else cb?.();
    },
  };
}

/** One record as one pino-pretty line. */
function prettyRenderer(opts: { colorize?: boolean } = {}): RenderRecord {
  return prettyFactory({
    colorize: opts.colorize ?? defaultColorize(),
    singleLine: true,
    // pino-pretty puts `err`/`error` on lines of their own even with singleLine: a failure's
    // reason would leave the line that names its stream, route and pod (grep loses it).
    errorLikeObjectKeys: [],
    ignore: 'pid,hostname',
    translateTime: 'SYS:HH:MM:ss.l',
  });
}

/** stderr in the requested shape; `auto` decides by whether stderr is a terminal. */
export function stderrDestination(format: LogFormat): DestinationStream {
  if (resolveLogFormat(format) !== 'pretty') return stderrStream();
  // What the stream writes itself (the count of lines dropped for a slow reader) is pretty too.
  return prettyDestination(stderrStream(prettyRenderer()));
}

function defaultColorize(): boolean {
  // colorette's rule, as pino-pretty applies it to its own streams.
  if ('NO_COLOR' in process.env) return false;
  if ('FORCE_COLOR' in process.env) return process.env.FORCE_COLOR !== '0';
  return process.stderr.isTTY === true && process.env.TERM !== 'dumb';
}
