// Why a recursive mkdir failed.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Node's recursive mkdir reports ENOENT when a directory cannot be made for another reason: on a
 * read-only file system (a container's, a CI job's home) the directory "did not exist". The first
 * missing directory, made alone, says why (EROFS, EACCES); `err` otherwise.
 */
export function mkdirFailure(dir: string, err: NodeJS.ErrnoException): NodeJS.ErrnoException {
  if (err.code !== 'ENOENT') return err;
  let missing = dir;
  while (path.dirname(missing) !== missing && !existsSync(path.dirname(missing))) missing = path.dirname(missing);
  try {
    mkdirSync(missing, { mode: 0o700 });
  } catch (cause) {
    return cause as NodeJS.ErrnoException;
  }
  return err;
}
