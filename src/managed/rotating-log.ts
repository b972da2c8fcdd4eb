// The managed daemon's log file, rotated by size so that a client provoking log lines cannot
// fill the disk: when the file reaches maxBytes it becomes FILE.1 (FILE.1 becomes FILE.2, …, the
// oldest beyond `keep` is dropped) and writing goes on in a new FILE. `logs -f` follows by inode,
// so it reads the rest of the old file and then the new one (managed/logs.ts).
//
// A small rotator on pino's own destination (SonicBoom) rather than a library: pino-roll runs as
// a worker-thread transport and rotating-file-stream as an async Writable, and neither gives the
// synchronous flush the daemon needs on a crash, nor the reopen SIGHUP (logrotate) uses.
// Writes are synchronous: a daemon logs a few lines per stream (failure lines are rate-limited,
// core/log-limit.ts), and with nothing buffered, everything before a rotation is in the old file
// by the time it is renamed.
import { renameSync, statSync } from 'node:fs';
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
  private readonly dest: ReturnType<typeof pino.destination>;
  private size: number;

  constructor(readonly file: string, private readonly rotation: LogRotation = LOG_ROTATION_DEFAULTS) {
    this.dest = pino.destination({ dest: file, append: true, sync: true, mode: 0o600 });
    this.size = sizeOf(file);
  }

  write(line: string): boolean {
    const ok = this.dest.write(line);
    this.size += Buffer.byteLength(line);
    if (this.size >= this.rotation.maxBytes) this.rotate();
    return ok;
  }

  /** FILE → FILE.1 → … → FILE.keep (the previous FILE.keep is replaced), then a new FILE. */
  rotate(): void {
    try {
      for (let i = this.rotation.keep; i >= 1; i--) {
        const from = i === 1 ? this.file : `${this.file}.${i - 1}`;
        try {
          renameSync(from, `${this.file}.${i}`);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
    } catch {
      // Could not rotate (a read-only directory?): keep writing where we are rather than lose lines.
      return;
    }
    this.dest.reopen();
    this.size = 0;
  }

  /** Reopens FILE by name (SIGHUP, after logrotate moved it). */
  reopen(): void {
    this.dest.reopen();
    this.size = sizeOf(this.file);
  }

  flush(cb?: (err?: Error) => void): void {
    this.dest.flush(cb);
  }

  flushSync(): void {
    this.dest.flushSync();
  }
}
