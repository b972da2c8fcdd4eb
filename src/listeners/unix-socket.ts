// Unix-socket listeners (--listen-socks unix:PATH, --listen-http unix:PATH). A loopback TCP port
// is open to every local user; a unix socket is a file, so the kernel checks its permissions on
// connect (write permission is needed, unix(7)). It is created 0600 inside a directory we own that
// no one else can write, so only this user (and root) can use it. A socket file left by a killed
// proxy is replaced only after a connect to it is refused; anything else already at the path
// (another user's file, a regular file, a live listener) is refused.
import net from 'node:net';
import path from 'node:path';
import { chmodSync, lstatSync, realpathSync, statSync, unlinkSync } from 'node:fs';
import { createPrivateDir } from '../core/private-dir.js';
import type { AddressInfo } from 'node:net';
import { StartupError } from '../core/errors.js';
import { replaceableAt } from '../core/replaceable-path.js';
import { mkdirFailure } from '../core/mkdir-failure.js';
import { UNIX_SOURCE } from '../auth/source.js';

/** The family recorded for unix listeners in AddressInfo-shaped addresses (address = the path). */
export const UNIX_FAMILY = 'unix';

/** The client address logged (and throttled by, auth/source.ts) for connections to a unix socket. */
export const UNIX_CLIENT = UNIX_SOURCE;

const myUid = (): number | undefined => (typeof process.getuid === 'function' ? process.getuid() : undefined);
const octal = (mode: number) => (mode & 0o777).toString(8).padStart(3, '0');

/** Creates the parent (0700) when missing and refuses one another user owns or others can write. */
export function checkParent(file: string, flag: string): void {
  const dir = path.dirname(file);
  try {
    lstatSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new StartupError(`${flag} unix:${file}: cannot inspect ${dir}: ${(err as Error).message}`);
    try {
      createPrivateDir(dir);
    } catch (mkErr) {
      throw new StartupError(`${flag} unix:${file}: cannot create ${dir}: ${mkdirFailure(dir, mkErr as NodeJS.ErrnoException).message}`);
    }
  }
  const st = statSync(dir);
  const uid = myUid();
  // A symlink someone else owns can be pointed elsewhere after we checked its target.
  const link = lstatSync(dir);
  if (uid !== undefined && link.isSymbolicLink() && link.uid !== uid) {
    throw new StartupError(`${flag} unix:${file}: refusing the directory ${dir}: it is a symlink owned by uid ${link.uid}, not by you (uid ${uid})`);
  }
  if (!st.isDirectory()) throw new StartupError(`${flag} unix:${file}: ${dir} is not a directory`);
  if (uid !== undefined && st.uid !== uid) {
    throw new StartupError(
      `${flag} unix:${file}: refusing the directory ${dir}: it is owned by uid ${st.uid}, not by you (uid ${uid}); put the socket in a directory of your own`,
    );
  }
  if ((st.mode & 0o022) !== 0) {
    throw new StartupError(
      `${flag} unix:${file}: refusing the directory ${dir}: group or others can write it (mode ${octal(st.mode)}), so they could replace the socket; use a 0700 directory`,
    );
  }
  if (uid !== undefined) checkAncestors(realpathSync(dir), uid, file, flag);
}

/**
 * Every directory above the socket's own must be safe from other users (core/replaceable-path.ts):
 * one who could move our directory aside would put their own socket in its place, and our
 * clients would then hand them their credentials and targets.
 */
function checkAncestors(dir: string, uid: number, file: string, flag: string): void {
  const at = replaceableAt(dir, uid);
  if (!at) return;
  if (at.owner !== undefined) {
    throw new StartupError(
      `${flag} unix:${file}: refusing ${at.dir} on the way to the socket: it is owned by uid ${at.owner}, who could move ${at.child} aside and put a socket of theirs in its place; put the socket under directories only you or root own`,
    );
  }
  throw new StartupError(
    `${flag} unix:${file}: refusing ${at.dir} on the way to the socket: group or others can write it (mode ${octal(at.mode!)}) and it is not sticky, so they could move ${at.child} aside`,
  );
}

/** Resolves when nothing accepts on the socket (ECONNREFUSED: a stale file), rejects otherwise. */
function assertNobodyListens(file: string, flag: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.connect({ path: file });
    probe.once('connect', () => {
      probe.destroy();
      reject(new StartupError(`${flag} unix:${file}: another process is listening on this socket (is another proxy running?)`));
    });
    probe.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED') resolve();
      else reject(new StartupError(`${flag} unix:${file}: cannot check the existing socket: ${err.message}`));
    });
  });
}

/** Makes the path usable: a fresh one, or our own stale socket (removed). Refuses everything else. */
async function clearPath(file: string, flag: string): Promise<void> {
  let st;
  try {
    st = lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new StartupError(`${flag} unix:${file}: ${(err as Error).message}`);
  }
  const uid = myUid();
  if (uid !== undefined && st.uid !== uid) throw new StartupError(`${flag} unix:${file}: refusing a path owned by uid ${st.uid}, not by you (uid ${uid})`);
  if (!st.isSocket()) throw new StartupError(`${flag} unix:${file}: the path exists and is not a socket; refusing to replace it`);
  await assertNobodyListens(file, flag);
  unlinkSync(file);
}

/**
 * Listens on a unix socket at `file` (absolute), created 0600. The umask is narrowed around
 * listen() (Node binds synchronously there) so the socket is never reachable with wider
 * permissions, then the mode is set explicitly as well.
 */
export async function listenUnix(server: net.Server, file: string, what: string, flag: string): Promise<AddressInfo> {
  checkParent(file, flag);
  await clearPath(file, flag);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      reject(
        new StartupError(
          `cannot listen for ${what} on unix:${file}: ${err.code === 'EADDRINUSE' ? 'the path is taken (created by someone else meanwhile)' : err.message}`,
          { cause: err },
        ),
      );
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    const previous = process.umask(0o177);
    try {
      server.listen({ path: file, exclusive: true });
    } finally {
      process.umask(previous);
    }
  });
  chmodSync(file, 0o600);
  return { address: file, port: 0, family: UNIX_FAMILY };
}

/** True for an address listenUnix returned (or one read back from state.json). */
export function isUnixAddress(a: { family?: string | number } | undefined): boolean {
  return a?.family === UNIX_FAMILY;
}
