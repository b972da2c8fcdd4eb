// The managed daemon's log file, rotated by size so that a client provoking log lines cannot
// fill the disk: when the file reaches maxBytes its content is copied to FILE.1 (FILE.1 becomes
// FILE.2, …, the oldest beyond `keep` is dropped) and FILE is emptied in place. In place, not
// renamed: the daemon's stderr is FILE too (connect opens it for the daemon's stdio), and what
// only the runtime writes there — an out-of-memory abort — must land in the FILE `logs` shows,
// not in a rotated or deleted one. `logs -f` reads the rest of FILE.1 when FILE shrinks
// (managed/logs.ts).
//
// A small rotator on pino's own destination (SonicBoom) rather than a library: pino-roll runs as
// a worker-thread transport and rotating-file-stream as an async Writable, and neither gives the
// synchronous flush the daemon needs on a crash, nor the reopen SIGHUP (logrotate) uses.
// Writes are synchronous: a daemon logs a few lines per stream (failure lines are rate-limited,
// core/log-limit.ts), and with nothing buffered, everything before a rotation is in the file by
// the time it is copied.
import { chmodSync, copyFileSync, renameSync, statSync, truncateSync } from 'node:fs';
import { pino } from 'pino';

export interface LogRotation {
  /** Rotate once the file has reached this size. */
  maxBytes: number;
  /** Rotated files kept (FILE.1 … FILE.keep). */
  keep: number;
}

export const LOG_ROTATION_DEFAULTS: LogRotation = { maxBytes: 10 * 1024 * 1024, keep: 3 };

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** A pino destination (write, flush, flushSync, reopen) that rotates its file by size. */
export class RotatingLogFile {
  private dest: ReturnType<typeof pino.destination>;
  private size: number;
  /** The destination's last write failed (ENOSPC, EIO): what it holds cannot be written now. */
  private failing = false;

  constructor(
    readonly file: string,
    private readonly rotation: LogRotation = LOG_ROTATION_DEFAULTS,
  ) {
    this.dest = this.open();
    this.size = sizeOf(file);
  }

  /** A destination on FILE; throws when FILE cannot be opened. */
  private open(): ReturnType<typeof pino.destination> {
    const dest = pino.destination({ dest: this.file, append: true, sync: true, mode: 0o600 });
    // A log must never end the daemon: a failed write (ENOSPC) keeps its lines in the
    // destination until the next rotation replaces it (every maxBytes counted), and a failed
    // close of the file it leaves is of no consequence.
    dest.on('error', () => {
      if (dest === this.dest) this.failing = true;
    });
    dest.on('write', () => {
      if (dest === this.dest) this.failing = false;
    });
    return dest;
  }

  write(line: string): boolean {
    const ok = this.dest.write(line);
    this.size += Buffer.byteLength(line);
    if (this.size >= this.rotation.maxBytes) this.rotate();
    return ok;
  }

  /** FILE.1 → … → FILE.keep (the previous FILE.keep is replaced), FILE copied to FILE.1, FILE emptied. */
  rotate(): void {
    // Also when it fails: the next try comes after another maxBytes, not at every line.
    this.size = 0;
    try {
      for (let i = this.rotation.keep; i >= 2; i--) {
        try {
          renameSync(`${this.file}.${i - 1}`, `${this.file}.${i}`);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
      // Writes are synchronous: nothing of ours lands between the copy and the truncation.
      copyFileSync(this.file, `${this.file}.1`);
      chmodSync(`${this.file}.1`, 0o600);
      truncateSync(this.file, 0);
    } catch {
      // Could not rotate (a read-only directory, a full disk): keep writing where we are rather
      // than lose lines.
    }
  }

  /** Reopens FILE by name (SIGHUP, after logrotate moved it). */
  reopen(): void {
    if (this.reopenOrKeep()) this.size = sizeOf(this.file);
  }

  /**
   * A new destination on FILE, the old one closed; when FILE cannot be opened (its directory was
   * removed, EMFILE) the old one is kept and writing goes on there. Not SonicBoom's reopen(): in
   * sync mode it throws from the log call that rotated (ending the daemon), and each failed try
   * leaves a listener that closes the old descriptor again once a later try succeeds — by then
   * perhaps another file's.
   */
  private reopenOrKeep(): boolean {
    let next: ReturnType<typeof pino.destination>;
    try {
      next = this.open();
    } catch {
      return false;
    }
    const old = this.dest;
    this.dest = next;
    this.failing = false;
    old.destroy();
    return true;
  }

  flush(cb?: (err?: Error) => void): void {
    this.dest.flush(cb);
  }

  /**
   * Writes what the destination holds, unless its last write failed: sonic-boom 4's flushSync
   * retries a failing write for ever in a sleep loop deaf to signals (a daemon on a full disk hung
   * in its crash handler, holding its ports). Writes are synchronous, so a destination whose last
   * write worked holds nothing.
   */
  flushSync(): void {
    if (!this.failing) this.dest.flushSync();
  }
}
