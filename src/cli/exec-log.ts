// Where exec's temporary proxy logs. The terminal belongs to CMD, so only warnings and errors go to
// stderr (pretty in a terminal, JSON lines elsewhere, as the foreground proxy's); every line at
// --log-level goes to the state directory's logs/exec.log (rotated like a daemon's log), which
// `kubectl proxyout logs exec` reads. One --log-level default then serves every proxy.
import { pino } from 'pino';
import { createLogger, type Logger, type LogLevel } from '../core/log.js';
import { stderrDestination } from '../core/log-format.js';
import { RotatingLogFile } from '../managed/rotating-log.js';
import { EXEC_LOG_ID, ensureStateDir, type StateLayout } from '../state/paths.js';

export interface ExecLog {
  log: Logger;
  file: string;
  /** Writes out what is buffered; the file is closed by the process's exit. */
  flush(): Promise<void>;
}

/** `level`, or warn when `level` lets more through (pino's numbers: trace 10 … fatal 60). */
const warnOrAbove = (level: Exclude<LogLevel, 'silent'>): LogLevel => (pino.levels.values[level]! >= pino.levels.values.warn! ? level : 'warn');

export function execLog(l: StateLayout, level: LogLevel): ExecLog {
  ensureStateDir(l);
  const file = l.logFile(EXEC_LOG_ID);
  const dest = new RotatingLogFile(file);
  const stderr = stderrDestination('auto');
  const streams =
    level === 'silent'
      ? []
      : [
          { level, stream: dest },
          { level: warnOrAbove(level), stream: stderr },
        ];
  const log = createLogger(level, pino.multistream(streams as Parameters<typeof pino.multistream>[0]));
  return {
    log,
    file,
    flush: () =>
      new Promise<void>((resolve) => {
        dest.flushSync();
        const s = stderr as { flush?: (cb: () => void) => void };
        if (s.flush) s.flush(() => resolve());
        else resolve();
      }),
  };
}
