// Reading a file the user names (the config file, a kubeconfig) without letting it freeze the
// process: a FIFO (mkfifo config.yaml) would block a synchronous read — the whole event loop, every
// request — until something writes to it; a device or a huge file has no business being read.
// The file is opened non-blocking and checked on the descriptor it was opened as (no window for a
// swap between a check and the read), then read whole.
import { closeSync, constants, fstatSync, openSync, readFileSync, statSync } from 'node:fs';

/** What a config or kubeconfig file may weigh. */
export const MAX_CONFIG_BYTES = 8 * 1024 * 1024;

export class NotRegularFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotRegularFileError';
  }
}

/** Throws NotRegularFileError unless `file` is a regular file (following symlinks) of at most `maxBytes`. */
export function checkRegularFile(file: string, maxBytes = MAX_CONFIG_BYTES): void {
  const st = statSync(file);
  if (!st.isFile()) throw new NotRegularFileError(`${file} is not a regular file`);
  if (st.size > maxBytes) throw new NotRegularFileError(`${file} is ${st.size} bytes, more than the ${maxBytes} a config file may have`);
}

/** The bytes of a regular file of at most `maxBytes`; a FIFO, a device or a directory is refused at once. */
export function readRegularBytes(file: string, maxBytes = MAX_CONFIG_BYTES): Buffer {
  const fd = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new NotRegularFileError(`${file} is not a regular file`);
    if (st.size > maxBytes) throw new NotRegularFileError(`${file} is ${st.size} bytes, more than the ${maxBytes} a config file may have`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A file as it is now (identity, size, mtime), to tell a rewrite; the error code when it cannot be read. */
export function fileStamp(file: string): string {
  try {
    const s = statSync(file);
    return `${s.ino}/${s.size}/${s.mtimeMs}`;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'unreadable';
  }
}
