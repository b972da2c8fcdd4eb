// client-node's exec credential plugin runner (dist/exec_auth.js, ExecAuth) keeps a plugin's
// ExecCredential until its expirationTimestamp, whatever the API server says of it. client-go
// (plugin/pkg/client/auth/exec/exec.go, roundTripper + maybeRefreshCreds) runs the plugin again
// once the server answers 401 to the credential it gave: a token revoked, a cluster re-created,
// a user who logged in again — kubectl then works at once, so the proxy must too, not an hour
// later. ExecAuth is reached through the KubeConfig's authenticators (not public API).
//
// client-node also spawns the plugin with stdin an open pipe it never writes to or closes, so a
// plugin that reads stdin (a prompt, "press Enter to open the browser") waits for ever, and with
// it every request of the proxy. We never have a terminal for it (exec-info.ts sends
// interactive: false), so, as client-go does for a non-interactive plugin (exec.go: cmd.Stdin is
// set only when interactive), its stdin is the null device: a read sees end-of-file at once.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import type { KubeConfig } from '@kubernetes/client-node';

interface ExecAuthLike {
  tokenCache: Record<string, unknown>;
  execFn: unknown;
  getCredential(user: ExecUser): Promise<unknown>;
}

interface ExecUser {
  name: string;
  exec?: { command?: string; installHint?: string; interactiveMode?: string };
  token?: string;
  username?: string;
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
}

/**
 * The user carries a token, a password or a client certificate and key besides `exec`: client-go
 * then never runs the plugin (exec.go UpdateTransportConfig); client-node ran it, and a plugin
 * that failed (not installed here, a lapsed login) failed credentials kubectl sends as they are.
 */
const hasOtherAuth = (u: ExecUser): boolean => !!(u.token || u.username || ((u.certData || u.certFile) && (u.keyData || u.keyFile)));

/** The KubeConfig's exec authenticator (shared by every KubeConfig made from it with Object.create). */
export function execAuthOf(kc: KubeConfig): ExecAuthLike | undefined {
  const list = (kc as unknown as { authenticators?: unknown[] }).authenticators;
  return list?.find((a): a is ExecAuthLike => !!a && typeof a === 'object' && 'tokenCache' in a && 'execFn' in a);
}

/**
 * Makes the KubeConfig's exec plugins run without stdin (in place); no-op without ExecAuth. What
 * a plugin writes on stderr is copied to `stderr` as it comes — by default ours when it is a
 * terminal: a device-code login ("open URL and enter the code …") is a prompt the user must see
 * while the plugin waits, as kubectl shows it (exec.go: cmd.Stderr is the process's). A daemon's
 * stderr is its log file: there the text reaches errors only (api.ts credentialsFailed).
 */
export function runExecPluginsWithoutStdin(
  kc: KubeConfig,
  stderr: NodeJS.WritableStream | undefined = process.stderr.isTTY ? process.stderr : undefined,
  answerMs = PLUGIN_ANSWER_MS,
): void {
  const auth = execAuthOf(kc);
  if (!auth) return;
  auth.tokenCache = keptUntilRefused();
  let started: ChildProcess | undefined;
  auth.execFn = (command: string, args: string[] | undefined, opts: SpawnOptions) => {
    const child = spawn(command, args ?? [], { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    if (stderr) child.stderr?.on('data', (chunk: Buffer) => stderr.write(chunk));
    return (started = child);
  };
  const getCredential = auth.getCredential.bind(auth);
  auth.getCredential = async (user: ExecUser) => {
    if (hasOtherAuth(user)) return null;
    if (user.exec?.interactiveMode === 'Always') throw needsTerminal(user);
    started = undefined;
    const run = getCredential(user);
    // ExecAuth spawns before its first await: `started` is this run's plugin, if it started one.
    const credential = await withinAnswerTime(run, started, answerMs, user).catch((err: unknown) => {
      throw notRunnable(err, user) ?? err;
    });
    const problem = user.exec ? credentialProblem(credential) : undefined;
    if (!problem) return credential;
    auth.tokenCache[user.name] = null;
    throw new Error(`the exec credential plugin of user "${user.name}" ${problem}; run it by hand to see its output`);
  };
}

/**
 * How long a plugin may take to answer. client-go waits for ever, and with it every request of
 * the proxy: a plugin stuck on a prompt nobody sees (a daemon's) or a dead network left the route
 * silent for good. Longer than interactive logins wait for the user (kubelogin: 3 min).
 */
const PLUGIN_ANSWER_MS = 5 * 60_000;

/** `run`, or a failure naming the plugin once `child` has not answered within `ms` (it is then killed). */
function withinAnswerTime<T>(run: Promise<T>, child: ChildProcess | undefined, ms: number, user: ExecUser): Promise<T> {
  if (!child) return run;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      run.catch(() => undefined);
      child.kill();
      // A process the plugin started may hold its pipes open past its own end.
      child.stdout?.destroy();
      child.stderr?.destroy();
      reject(
        new Error(
          `the exec credential plugin "${user.exec?.command}" of user "${user.name}" gave no answer within ${ms / 1000} s; run it by hand to see what it waits for`,
        ),
      );
    }, ms);
    timer.unref();
  });
  return Promise.race([run, late]).finally(() => clearTimeout(timer));
}

/**
 * What client-go refuses in a plugin's ExecCredential (exec.go refreshCredsLocked). client-node
 * sent such a credential as none at all, so the API server's answer spoke of RBAC for
 * system:anonymous, or failed in a TypeError or a PEM parse error.
 */
function credentialProblem(credential: unknown): string | undefined {
  const status = (credential as { status?: unknown } | null)?.status as Record<string, unknown> | null | undefined;
  if (!status || typeof status !== 'object') return 'returned no status field';
  const cert = !!status.clientCertificateData;
  const key = !!status.clientKeyData;
  if (!status.token && !cert && !key) return 'returned neither a token nor a client certificate and key';
  if (cert !== key) return 'returned only a client certificate or key, not both';
  return undefined;
}

/**
 * A plugin that must have a terminal: kubectl refuses to run it without one ("exec plugin cannot
 * support interactive mode: standard input is not a terminal"), and the proxy never has one.
 */
function needsTerminal(user: ExecUser): Error {
  return new Error(
    `the exec credential plugin "${user.exec?.command}" of user "${user.name}" has interactiveMode: Always, and the proxy has no terminal to give it (kubectl refuses it too without one): set interactiveMode: IfAvailable, or Never for a plugin that can log in on its own`,
  );
}

/** A plugin that cannot be started: named, with the kubeconfig's installHint as kubectl prints it. */
function notRunnable(err: unknown, user: ExecUser): Error | undefined {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code !== 'ENOENT' && code !== 'EACCES') return undefined;
  const hint = user.exec?.installHint
    ?.trim()
    .split(/\s*\n\s*/)
    .join(' ');
  const what = code === 'ENOENT' ? 'was not found' : 'may not be run (permission denied)';
  return new Error(`the exec credential plugin "${user.exec?.command}" of user "${user.name}" ${what}${hint ? `: ${hint}` : ''}`, { cause: err });
}

/**
 * How much longer the current user's cached ExecCredential may be sent (ms), by its
 * expirationTimestamp; undefined without one (client-go exec.go keeps such a credential until a 401).
 */
export function execCredentialValidForMs(kc: KubeConfig): number | undefined {
  const name = kc.getCurrentUser()?.name;
  const cached = name === undefined ? undefined : (execAuthOf(kc)?.tokenCache[name] as { status?: { expirationTimestamp?: string } } | null | undefined);
  const stamp = cached?.status?.expirationTimestamp;
  const at = stamp && stamp !== NO_EXPIRY ? Date.parse(stamp) : NaN;
  return Number.isNaN(at) ? undefined : at - Date.now();
}

/** Forget every cached exec credential, so the next request runs the plugin again (after a 401). */
export function expireExecCredentials(kc: KubeConfig): void {
  const auth = execAuthOf(kc);
  if (auth) auth.tokenCache = keptUntilRefused();
}

/** What a credential without an expiry is kept until: a 401 (expireExecCredentials), not a date. */
const NO_EXPIRY = '9999-12-31T23:59:59Z';

/**
 * ExecAuth's cache, keeping a credential that names no expirationTimestamp until the API server
 * refuses it, as client-go does (exec.go: credsExpired is false without one). client-node reads
 * the missing date as NaN, so it ran the plugin again at every computation of the options.
 */
function keptUntilRefused(): Record<string, unknown> {
  return new Proxy<Record<string, unknown>>(
    {},
    {
      set(target, key: string, value: { status?: { expirationTimestamp?: string } } | null) {
        const status = value?.status;
        target[key] = status && !status.expirationTimestamp ? { ...value, status: { ...status, expirationTimestamp: NO_EXPIRY } } : value;
        return true;
      },
    },
  );
}

/**
 * An exec plugin whose stdout is not JSON fails inside client-node's JSON.parse, and V8's message
 * quotes the start of that output ('Unexpected token 'a', "abc123sec"... is not valid JSON'): a
 * plugin that prints a raw token would have it logged. The message keeps the position only.
 */
export function withoutPluginOutput(err: unknown): unknown {
  if (!(err instanceof SyntaxError)) return err;
  const at = /at position \d+/.exec(err.message)?.[0];
  return new Error(
    `the kubeconfig's exec credential plugin printed something that is not an ExecCredential JSON object${at ? ` (${at})` : ''}; run the plugin by hand to see its output`,
  );
}
