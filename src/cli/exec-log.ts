// Where exec's temporary proxy logs. The terminal belongs to CMD, so only warnings and errors go to
// stderr (pretty in a terminal, JSON lines elsewhere, as the foreground proxy's); every line at
// --log-level goes to the state directory's logs/exec.log (rotated like a daemon's log), which
// `kubectl proxyout logs exec` reads. One --log-level default then serves every proxy.
import { pino } from 'pino';
import { createLogger, type Logger, type LogLevel } from '../core/log.js';
import { stderrDestination } from '../core/log-format.js';
import { RotatingLogFile } from '../managed/rotating-log.js';
import { EXEC_LOG_ID, ensureStateDir, type StateLayout } from '../state/paths.js';
import { errorMessage } from '../core/errors.js';

export interface ExecLog {
  log: Logger;
  /** The log file, or why none is kept (a read-only or unwritable home, as CI jobs have). */
  kept: { file: string } | { reason: string };
  /** Writes out what is buffered; the file is closed by the process's exit. */
  flush(): Promise<void>;
}

/** `level`, or warn when `level` lets more through (pino's numbers: trace 10 … fatal 60). */
const warnOrAbove = (level: Exclude<LogLevel, 'silent'>): LogLevel => (pino.levels.values[level]! >= pino.levels.values.warn! ? level : 'warn');

export function execLog(l: StateLayout, level: LogLevel): ExecLog {
  // The log is for later reading: a state directory that cannot be made or written keeps CMD
  // from running no more than it would keep kubectl from it.
  let dest: RotatingLogFile | undefined;
  let kept: ExecLog['kept'];
  try {
    ensureStateDir(l);
    dest = new RotatingLogFile(l.logFile(EXEC_LOG_ID));
    kept = { file: dest.file };
  } catch (err) {
    kept = { reason: errorMessage(err) };
  }
  const stderr = stderrDestination('auto');
  const streams = level === 'silent' ? [] : [...(dest ? [{ level, stream: dest }] : []), { level: warnOrAbove(level), stream: stderr }];
  const log = createLogger(level, pino.multistream(streams as Parameters<typeof pino.multistream>[0]));
  return {
    log,
    kept,
    flush: () =>
      new Promise<void>((resolve) => {
        dest?.flushSync();
        const s = stderr as { flush?: (cb: () => void) => void };
        if (s.flush) s.flush(() => resolve());
        else resolve();
      }),
  };
}
