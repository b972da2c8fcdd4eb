// Where managed proxies keep their state. One directory per user:
//
//   <state dir>/
//     lock                      proper-lockfile's lock (a directory) while a CLI or daemon changes state
//     proxies/<id>/state.json   options, pid + process start identity, addresses, phase   (0600)
//     proxies/<id>/kubeconfig   the transient single-context kubeconfig: the only secret  (0600)
//     proxies/<id>/control.sock the daemon's control socket (too long: controlEndpoint)   (0600)
//     proxies/<id>/proxy-auth   proxy credentials for the daemon; it deletes them on reading (0600)
//     logs/<id>.log             the daemon's JSON log lines; kept after it stops          (0600)
//
// Directories are 0700. The location is $KUBECTL_PROXYOUT_STATE_DIR when set, else the per-user
// place: $XDG_STATE_HOME/kubectl-proxyout (~/.local/state/kubectl-proxyout) on Linux and other
// Unixes, env-paths' ~/Library/Application Support/kubectl-proxyout on macOS.
import { lstatSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { homedir, tmpdir } from 'node:os';
import envPaths from 'env-paths';
import { isPlainUrlPath } from '../core/url-path.js';
import { mkdirFailure } from '../core/mkdir-failure.js';
import { createPrivateDir } from '../core/private-dir.js';

export const STATE_DIR_ENV = 'KUBECTL_PROXYOUT_STATE_DIR';
const APP = 'kubectl-proxyout';

/** Connection IDs: also directory and file names, so nothing that could escape a directory. */
export const ID_PATTERN = /^[a-z0-9-]{1,40}$/;

/** Unix socket paths are limited (108 bytes on Linux, 104 on macOS, NUL included). */
const MAX_SOCKET_PATH = 103;

export class StateDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StateDirError';
  }
}

/**
 * A leading `~` or `~/` as the home directory, as a shell expands it. Such values come from where
 * no shell does (a .env file, a service's Environment=, `unix:~/x` after a colon): resolved as they
 * are, they made a directory named `~` in whatever directory the command ran in.
 */
export function expandHome(p: string, home: string = homedir()): string {
  return p === '~' || p.startsWith('~/') || (path.sep === '\\' && p.startsWith('~\\')) ? path.join(home, p.slice(1)) : p;
}

/** The configured state directory (absolute), without touching the file system. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[STATE_DIR_ENV];
  if (override) return path.resolve(expandHome(override));
  if (process.platform === 'darwin' || process.platform === 'win32') return envPaths(APP, { suffix: '' }).data;
  // Where the XDG spec puts state that should survive a reboot but is not worth a backup. A
  // relative $XDG_STATE_HOME is invalid there and ignored: taken as it is, each working directory
  // had a state directory of its own, and `status` or `disconnect` run elsewhere lost the proxy.
  const xdg = env.XDG_STATE_HOME;
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(homedir(), '.local', 'state'), APP);
}

/**
 * An ID for a new proxy: also not beginning with "-", which the commands that take an ID read as
 * a flag (`disconnect --all`, printed as the way to stop a proxy named "--all", stopped every one).
 * Existing IDs stay valid: their proxies can still be stopped (`disconnect -- -x`).
 */
export function validateNewId(id: string): string {
  validateId(id);
  if (id.startsWith('-')) throw new StateDirError(`invalid connection ID "${id}": it must not begin with "-" (commands would take it for a flag)`);
  return id;
}

/** Not a connection ID: `logs exec` is the log of exec's temporary proxies. */
export const EXEC_LOG_ID = 'exec';

export function validateId(id: string): string {
  if (!ID_PATTERN.test(id)) throw new StateDirError(`invalid connection ID "${id}": use 1 to 40 characters from a-z, 0-9 and "-"`);
  return id;
}

export interface StateLayout {
  root: string;
  lockFile: string;
  proxiesDir: string;
  logsDir: string;
  proxyDir(id: string): string;
  stateFile(id: string): string;
  kubeconfigFile(id: string): string;
  /** A cluster route's transient kubeconfig (the default route uses kubeconfigFile). */
  routeKubeconfigFile(id: string, route: string): string;
  /** The routing table `reload` hands the daemon. */
  tableFile(id: string): string;
  /** Held (proper-lockfile) by a `reload` of the proxy from before it makes its table until it is done. */
  reloadLock(id: string): string;
  controlSocket(id: string): string;
  proxyAuthFile(id: string): string;
  /** Credentials `connect` generated, kept (0600) so that `connect` can print them again. */
  clientAuthFile(id: string): string;
  logFile(id: string): string;
}

/**
 * The daemon's control endpoint: a unix socket in its proxy directory; on Windows, which has no
 * unix sockets for Node's net module, a named pipe named after the state directory and the ID
 * (pipes live in one machine-wide namespace, so the state directory's hash keeps users apart).
 */
export function controlEndpoint(root: string, id: string, platform: NodeJS.Platform = process.platform, place: SocketPlace = {}): string {
  if (platform === 'win32') {
    const hash = createHash('sha256').update(path.win32.resolve(root).toLowerCase()).digest('hex').slice(0, 16);
    return `\\\\.\\pipe\\kubectl-proxyout-${hash}-${validateId(id)}`;
  }
  const inProxyDir = path.join(root, 'proxies', validateId(id), 'control.sock');
  if (Buffer.byteLength(inProxyDir) <= MAX_SOCKET_PATH) return inProxyDir;
  // Too long for a unix socket: macOS's ~/Library/Application Support/kubectl-proxyout/proxies/
  // leaves ~20 bytes for the user name and the ID together. Then it goes in the private socket
  // directory under the temporary one (as `unix:` listeners may), named by a hash of both.
  const name = `control-${createHash('sha256')
    .update(`${path.resolve(root)}\0${id}`)
    .digest('hex')
    .slice(0, 16)}.sock`;
  const fits = tmpSocketDirs(place)
    .map((dir) => path.join(dir, name))
    .find((file) => Buffer.byteLength(file) <= MAX_SOCKET_PATH);
  return fits ?? inProxyDir;
}

/** A Windows named pipe path (\\.\pipe\…), not a file. */
export function isNamedPipe(endpoint: string): boolean {
  return /^[\\/]{2}[.?][\\/]pipe[\\/]/i.test(endpoint);
}

export function layout(root: string = stateDir(), platform: NodeJS.Platform = process.platform, place: SocketPlace = {}): StateLayout {
  const proxiesDir = path.join(root, 'proxies');
  const logsDir = path.join(root, 'logs');
  const proxyDir = (id: string) => path.join(proxiesDir, validateId(id));
  return {
    root,
    lockFile: path.join(root, 'lock'),
    proxiesDir,
    logsDir,
    proxyDir,
    stateFile: (id) => path.join(proxyDir(id), 'state.json'),
    kubeconfigFile: (id) => path.join(proxyDir(id), 'kubeconfig'),
    routeKubeconfigFile: (id, route) => path.join(proxyDir(id), `kubeconfig.${route}`),
    tableFile: (id) => path.join(proxyDir(id), 'table.json'),
    reloadLock: (id) => path.join(proxyDir(id), 'reload.lock'),
    controlSocket: (id) => controlEndpoint(root, id, platform, place),
    proxyAuthFile: (id) => path.join(proxyDir(id), 'proxy-auth'),
    clientAuthFile: (id) => path.join(proxyDir(id), 'client-auth'),
    logFile: (id) => path.join(logsDir, `${validateId(id)}.log`),
  };
}

/** A clear error before forking rather than EINVAL/ENAMETOOLONG from listen() in the daemon. */
export function checkSocketPath(socketPath: string): void {
  if (isNamedPipe(socketPath)) return;
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
    throw new StateDirError(
      `the control socket path ${socketPath} is too long for a unix socket (${Buffer.byteLength(socketPath)} > ${MAX_SOCKET_PATH} bytes): ` +
        `set ${STATE_DIR_ENV} to a shorter directory or use a shorter --id`,
    );
  }
}

/**
 * Creates the state directory and its subdirectories (0700) and refuses one that others could
 * tamper with: not a directory, owned by another user, or writable by group/others.
 */
export function ensureStateDir(l: StateLayout = layout()): StateLayout {
  for (const dir of [l.root, l.proxiesDir, l.logsDir]) ensurePrivateDir(dir);
  return l;
}

/** Checks an existing state directory without creating anything; false when there is none. */
export function stateDirExists(l: StateLayout = layout()): boolean {
  try {
    statSync(l.root);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    // A home this user cannot read (an image's HOME under another UID): one line, and the way on.
    throw new StateDirError(`cannot read the state directory ${l.root}: ${(err as Error).message}; set ${STATE_DIR_ENV} to a directory of your own`);
  }
  checkSafe(l.root);
  return true;
}

function ensurePrivateDir(dir: string): void {
  try {
    lstatSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    try {
      // 0700 whatever the umask; never through a symlink someone put there meanwhile.
      createPrivateDir(dir);
    } catch (mkErr) {
      // A read-only home (a container's, a CI job's): say where else it can go.
      const elsewhere = process.env[STATE_DIR_ENV] ? `set ${STATE_DIR_ENV} to another one` : `set ${STATE_DIR_ENV} to a directory you can write`;
      throw new StateDirError(`cannot create the state directory ${dir}: ${mkdirFailure(dir, mkErr as NodeJS.ErrnoException).message}; ${elsewhere}`);
    }
  }
  checkSafe(dir);
}

function checkSafe(dir: string): void {
  const refusal = stateDirRefusal(dir);
  if (refusal) throw new StateDirError(refusal);
}

/**
 * Why an existing state directory (or its proxies/, logs/) is refused, or undefined: the one rule,
 * for every command that uses it and for `doctor`. Others could tamper with what it holds when it
 * is not a directory, is owned by another user (or reached through their symlink, which they can
 * point elsewhere after we checked), or is writable by group or others.
 */
export function stateDirRefusal(dir: string, uid: number | undefined = process.getuid?.()): string | undefined {
  const st = statSync(dir);
  if (!st.isDirectory()) return `the state directory ${dir} is not a directory`;
  const link = lstatSync(dir);
  if (uid !== undefined && link.isSymbolicLink() && link.uid !== uid) {
    return `refusing the state directory ${dir}: it is a symlink owned by uid ${link.uid}, not by you (uid ${uid})`;
  }
  if (uid !== undefined && st.uid !== uid) return `refusing the state directory ${dir}: it is owned by uid ${st.uid}, not by you (uid ${uid})`;
  if (process.platform !== 'win32' && (st.mode & 0o022) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(3, '0');
    return `refusing the state directory ${dir}: it is writable by group or others (mode ${mode}); run chmod 700 ${dir}`;
  }
  return undefined;
}

/**
 * The file of a unix-socket listener (--listen-socks unix:PATH): "" → <socket dir>/<kind>.sock, a
 * bare name → <socket dir>/NAME, anything with a "/" → that path (relative to the working
 * directory; `~/` the home), as given.
 */
export function unixSocketPath(text: string, kind: 'socks' | 'http', root: string = stateDir(), place: SocketPlace = {}): string {
  const file =
    text === ''
      ? path.join(socketDir(root, place), `${kind}.sock`)
      : text.includes('/')
        ? path.resolve(expandHome(text))
        : path.join(socketDir(root, place), text);
  if (Buffer.byteLength(file) > MAX_SOCKET_PATH) {
    throw new StateDirError(
      `the socket path ${file} is too long for a unix socket (${Buffer.byteLength(file)} > ${MAX_SOCKET_PATH} bytes): choose a shorter one`,
    );
  }
  return file;
}

/** The temporary directory and user the socket directory is chosen by (tests pass their own). */
export interface SocketPlace {
  tmp?: string;
  uid?: number;
}

/**
 * Where `unix:` and `unix:NAME` sockets go: the state directory, unless its path has characters a
 * proxy URL cannot carry as they are (core/url-path.ts) — macOS's ~/Library/Application Support
 * has a space, a home may have non-ASCII letters (which curl cannot take at all). The SOCKS URL
 * (socks5h://localhost/PATH) of a socket there is then plain: it goes in kubectl-proxyout-UID under
 * the temporary directory ($TMPDIR: per user on macOS), else under /tmp. listenUnix creates it 0700
 * and refuses one another user owns or others can write, as for any socket directory.
 */
export function socketDir(root: string, place: SocketPlace = {}): string {
  if (isPlainUrlPath(root)) return root;
  return tmpSocketDirs(place).find(isPlainUrlPath) ?? root;
}

/** kubectl-proxyout-UID under the temporary directory, then under /tmp; none without a UID. */
function tmpSocketDirs(place: SocketPlace): string[] {
  const uid = place.uid ?? (typeof process.getuid === 'function' ? process.getuid() : undefined);
  if (uid === undefined) return [];
  return [place.tmp ?? tmpdir(), '/tmp'].map((base) => path.join(base, `kubectl-proxyout-${uid}`));
}
