// Whose control socket a command is about to talk to. One too long for its proxy directory lives
// in kubectl-proxyout-UID under $TMPDIR (state/paths.ts controlEndpoint), and a shell with another
// $TMPDIR than `connect` had (none over ssh: /tmp) computes another path, which another user may
// have created first: their socket would answer `status`, `pac` (a PAC file of theirs for our
// browser), `reload` and `ui` as our daemon. Asked only when the directory and socket are ours.
import { lstatSync, statSync } from 'node:fs';
import path from 'node:path';
import { isNamedPipe } from '../state/paths.js';

/** Why `socketPath` is not ours to ask, or undefined (also when it does not exist: connecting says so). */
export function controlSocketRefusal(socketPath: string, uid: number | undefined = process.getuid?.()): string | undefined {
  if (uid === undefined || isNamedPipe(socketPath)) return undefined;
  const dir = path.dirname(socketPath);
  const refuse = (why: string) => `refusing the control socket ${socketPath}: ${why}, not by you (uid ${uid})`;
  try {
    const link = lstatSync(dir);
    if (link.isSymbolicLink() && link.uid !== uid) return refuse(`${dir} is a symlink owned by uid ${link.uid}`);
    const st = statSync(dir);
    if (st.uid !== uid) return refuse(`${dir} is owned by uid ${st.uid}`);
    if ((st.mode & 0o022) !== 0) return `refusing the control socket ${socketPath}: group or others can write ${dir}`;
    const sock = lstatSync(socketPath);
    if (sock.uid !== uid) return refuse(`it is owned by uid ${sock.uid}`);
  } catch {
    /* not there: the connect fails as it would */
  }
  return undefined;
}
