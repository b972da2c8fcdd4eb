// Keeps one kind of log line from flooding the log: a client can make the proxy log a line per
// request (20,000 credential-less requests once wrote 4.8 MB in a second). Per key, the first
// `burst` lines of a window are written; the rest are counted, and when the window ends one line
// says how many more there were. Counters elsewhere (status totals) stay exact.
import type { Logger } from './log.js';
import { testHookMs } from './test-hooks.js';

export interface RepeatLimit {
  /** How long one key's window lasts, from its first line. */
  windowMs: number;
  /** Lines per key written in full in one window. */
  burst: number;
  /** Keys tracked at once; beyond that, new keys share one (so memory stays bounded). */
  maxKeys: number;
}

export const REPEAT_LIMIT_DEFAULTS: RepeatLimit = { windowMs: 10_000, burst: 20, maxKeys: 1024 };

/**
 * Test hook, set by no flag or config key: a proxy the tests run as a process reads the window
 * from this variable (whole milliseconds, at least 1; anything else is ignored), so a test of the
 * summary line need not wait 10 s for it. Not documented for users: the window is 10 s.
 */
export const TEST_WINDOW_ENV = 'KUBECTL_PROXYOUT_TEST_LOG_REPEAT_WINDOW_MS';

function defaultLimit(): RepeatLimit {
  const windowMs = testHookMs(TEST_WINDOW_ENV);
  return windowMs !== undefined ? { ...REPEAT_LIMIT_DEFAULTS, windowMs } : REPEAT_LIMIT_DEFAULTS;
}

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
const OVERFLOW_KEY = '(other)';

interface Window {
  written: number;
  suppressed: number;
  level: Level;
  last: { fields: Record<string, unknown>; msg: string };
  timer: NodeJS.Timeout;
  /** When the window began (ms since the epoch): one ended early by flush() says how long it ran. */
  startedAt: number;
}

export class RepeatedLineLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly log: Logger,
    private readonly limit: RepeatLimit = defaultLimit(),
  ) {}

  /** Logs the line, or counts it when `key` has used its burst; true when it was written. */
  write(level: Level, key: string, fields: Record<string, unknown>, msg: string): boolean {
    const k = this.windows.has(key) || this.windows.size < this.limit.maxKeys ? key : OVERFLOW_KEY;
    let w = this.windows.get(k);
    if (!w) {
      const timer = setTimeout(() => this.close(k), this.limit.windowMs);
      timer.unref();
      w = { written: 0, suppressed: 0, level, last: { fields, msg }, timer, startedAt: Date.now() };
      this.windows.set(k, w);
    }
    w.last = { fields, msg };
    w.level = level;
    if (w.written < this.limit.burst) {
      w.written++;
      this.log[level](fields, msg);
      return true;
    }
    w.suppressed++;
    return false;
  }

  /** Ends every window now, writing their summaries (before the logger is flushed at exit). */
  flush(): void {
    for (const k of [...this.windows.keys()]) this.close(k, true);
  }

  private close(key: string, early = false): void {
    const w = this.windows.get(key);
    if (!w) return;
    clearTimeout(w.timer);
    this.windows.delete(key);
    if (w.suppressed === 0) return;
    const ms = early ? Math.min(this.limit.windowMs, Date.now() - w.startedAt) : this.limit.windowMs;
    const seconds = Math.round(ms / 100) / 10;
    this.log[w.level]({ ...w.last.fields, suppressed: w.suppressed }, `${w.suppressed} more like this in ${seconds} s, the last: ${w.last.msg}`);
  }
}
