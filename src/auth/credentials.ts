// Proxy credentials: one user:password pair that SOCKS5 clients present with RFC 1929 and HTTP
// clients with `Proxy-Authorization: Basic` (RFC 7617). Where they come from (a private file, the
// environment, argv) and the check that a listener reachable from other machines has them.
import { createHash, timingSafeEqual } from 'node:crypto';
import { lstatSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { StartupError, errorMessage } from '../core/errors.js';
import { formatHostPort, isLoopbackHost } from '../core/address.js';
import { FailedAuthThrottle, THROTTLE_DEFAULTS, type ThrottleOptions } from './throttle.js';

export const PROXY_AUTH_ENV = 'KUBECTL_PROXYOUT_PROXY_AUTH';

/** RFC 1929 carries ULEN and PLEN in one byte each, so neither may exceed 255 bytes. */
const MAX_FIELD_BYTES = 255;

export interface ProxyCredentials {
  username: string;
  password: string;
  /** How they were given; argv is visible to every local user in `ps`, so it earns a warning. */
  source: 'file' | 'env' | 'argv';
}

/** "user:password" (split at the first colon, as Basic auth does) → credentials, or a one-line error. */
export function parseCredentials(text: string, where: string, source: ProxyCredentials['source']): ProxyCredentials {
  const colon = text.indexOf(':');
  if (colon < 0) throw new StartupError(`${where}: expected user:password`);
  const username = text.slice(0, colon);
  const password = text.slice(colon + 1);
  for (const [what, value] of [
    ['user name', username],
    ['password', password],
  ] as const) {
    const bytes = Buffer.byteLength(value);
    if (bytes === 0) throw new StartupError(`${where}: the ${what} is empty (expected user:password)`);
    if (bytes > MAX_FIELD_BYTES) throw new StartupError(`${where}: the ${what} is longer than ${MAX_FIELD_BYTES} bytes (SOCKS5 cannot carry it)`);
    // Control characters cannot be typed into most clients' proxy URLs and break Basic auth.
    if (/[\u0000-\u001f\u007f]/.test(value)) throw new StartupError(`${where}: the ${what} contains control characters`);
  }
  return { username, password, source };
}

/**
 * The first line of a file only its owner can read. A file others can read (or write) is refused
 * rather than silently used, as ssh does with private keys; so is one another user owns (root
 * aside): its owner could set the password and ride this user's cluster access.
 */
export function readCredentialsFile(file: string): ProxyCredentials {
  const where = `--proxy-auth-file ${file}`;
  let text: string;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new StartupError(`${where}: not a regular file`);
    if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
      const mode = (st.mode & 0o777).toString(8).padStart(3, '0');
      throw new StartupError(`${where}: refusing a file that group or others can access (mode ${mode}); ${looseFileFix(file)}`);
    }
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid && st.uid !== 0)
      throw new StartupError(`${where}: refusing a file owned by another user (uid ${st.uid}, not ${uid}); write your own, chmod 600`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw new StartupError(`${where}: ${errorMessage(err)}`, { cause: err });
  }
  return parseCredentials(text.split(/\r?\n/, 1)[0] ?? '', where, 'file');
}

/**
 * How to close a file others can read. A Kubernetes Secret (or ConfigMap) volume is read-only,
 * 0644 unless the volume says otherwise, and chmod cannot change it: a sidecar's user is told
 * what can. Its files are symlinks into `..data/`, the kubelet's atomic-writer layout.
 */
function looseFileFix(file: string): string {
  let target = '';
  try {
    if (lstatSync(file).isSymbolicLink()) target = readlinkSync(file);
  } catch {
    /* it was just stat'ed; gone since: the plain advice */
  }
  if (!target.startsWith('..data/')) return `run chmod 600 ${file}`;
  return `it is in a Kubernetes Secret volume, which chmod cannot change: set the volume's defaultMode to 0400, or pass the credentials in $${PROXY_AUTH_ENV} (env valueFrom secretKeyRef)`;
}

/**
 * Credentials from the flags and the environment: the file first, then the argv value, then the
 * environment variable. undefined when none is given (authentication off).
 */
export function resolveCredentials(opts: { file?: string; inline?: string }, env: NodeJS.ProcessEnv = process.env): ProxyCredentials | undefined {
  if (opts.file !== undefined && opts.inline !== undefined) throw new StartupError('give either --proxy-auth-file or --proxy-auth, not both');
  if (opts.file !== undefined) return readCredentialsFile(opts.file);
  if (opts.inline !== undefined) return parseCredentials(opts.inline, '--proxy-auth', 'argv');
  const fromEnv = env[PROXY_AUTH_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return parseCredentials(fromEnv, `$${PROXY_AUTH_ENV}`, 'env');
  return undefined;
}

/** What to tell the user about credentials given on the command line. */
export const ARGV_WARNING =
  `--proxy-auth puts the password on the command line, where other local users can read it (ps, /proc); ` +
  `prefer --proxy-auth-file FILE (chmod 600) or $${PROXY_AUTH_ENV}`;

/**
 * A listener on anything but loopback is reachable from other machines, which would then use our
 * cluster credentials: refuse that without proxy credentials, in one line that says how to add them.
 */
export function requireCredentialsOffLoopback(listens: ReadonlyArray<{ flag: string; host: string; port: number }>, hasCredentials: boolean): void {
  if (hasCredentials) return;
  const exposed = listens.find((l) => !isLoopbackHost(l.host));
  if (!exposed) return;
  throw exposedWithoutCredentials(`${exposed.flag} ${formatHostPort(exposed.host, exposed.port)} is not a loopback address`);
}

/**
 * The check that counts, made after listening: a name (`localhost`, `*.localhost`) passes the
 * text check above, but resolves through /etc/hosts or DNS to whatever someone configured, so
 * only the address actually bound says whether the listener is loopback.
 */
export function requireCredentialsOnBoundAddress(flag: string, host: string, bound: { address: string; port: number }, hasCredentials: boolean): void {
  if (hasCredentials || isLoopbackHost(bound.address)) return;
  throw exposedWithoutCredentials(
    `${flag} ${formatHostPort(host, bound.port)} bound ${formatHostPort(bound.address, bound.port)}, which is not a loopback address`,
  );
}

function exposedWithoutCredentials(what: string): StartupError {
  return new StartupError(
    `${what}, so other machines could use your cluster access through it: ` +
      `add proxy credentials with --proxy-auth-file FILE (a chmod 600 file holding user:password) or $${PROXY_AUTH_ENV}=user:password`,
  );
}

const digest = (value: string | Buffer): Buffer => createHash('sha256').update(value).digest();

/**
 * The ISO-8859-1 bytes of `text`, when it has letters outside ASCII that all have them: what
 * clients that ignore the 407's charset send (Python requests, Java's SOCKS5 client).
 */
function latin1Form(text: string): Buffer | undefined {
  return /[^\x00-\x7f]/.test(text) && !/[^\x00-\xff]/.test(text) ? Buffer.from(text, 'latin1') : undefined;
}

/**
 * Checks presented credentials in constant time: both sides are hashed first, so neither the
 * length nor the first differing byte of the secret shows in the timing, and the user name and
 * password are both always compared. Each is taken in UTF-8 (what the 407 asks for) and, for
 * letters outside ASCII, in ISO-8859-1, which RFC 7617 §2.1 leaves clients free to send.
 */
export class ProxyAuth {
  readonly username: string;
  private readonly user: Buffer[];
  private readonly pass: Buffer[];
  /** Wrong passwords are answered late (auth/throttle.ts). */
  readonly throttle: FailedAuthThrottle;

  constructor(credentials: Pick<ProxyCredentials, 'username' | 'password'>, throttle: ThrottleOptions = THROTTLE_DEFAULTS) {
    this.throttle = new FailedAuthThrottle(throttle);
    this.username = credentials.username;
    const forms = (text: string) => [text, latin1Form(text) ?? text].map(digest);
    this.user = forms(credentials.username);
    this.pass = forms(credentials.password);
  }

  verify(username: string | Buffer, password: string | Buffer): boolean {
    const matches = (known: Buffer[], given: Buffer) => known.map((k) => timingSafeEqual(k, given)).some(Boolean);
    const userOk = matches(this.user, digest(username));
    const passOk = matches(this.pass, digest(password));
    return userOk && passOk;
  }
}

/**
 * What a client with wrong credentials is told and what the log says. Neither names the user
 * it presented: people type passwords into user name fields, and clients learn nothing either.
 */
export const WRONG_CREDENTIALS = 'wrong proxy user name or password';
