// Logging in to one hop of a chain (ssh2's Client over TCP, over a direct-tcpip channel of the
// hop before, or over a ProxyCommand's stdin/stdout), opening direct-tcpip channels, and ending
// the hops.
import { spawn } from 'node:child_process';
import { Duplex } from 'node:stream';
import type { Client, ClientChannel } from 'ssh2';
import { abortable } from '../core/abort.js';
import type { Logger } from '../core/log.js';
import { loadSsh2 } from './ssh2-lib.js';
import { AuthNotices, authHandler, loadCredentials } from './auth.js';
import type { SshHop } from './chain.js';
import { hopError, HostKeyRefusal, noCommonHostKeyError } from './failures.js';
import { hostKeyAlgorithmsFor, verifyHostKey } from './host-key-check.js';

/** A hop's ConnectTimeout when ssh config sets none (ssh2's readyTimeout default). */
export const HOP_CONNECT_TIMEOUT_MS = 20_000;

/**
 * How long hops get to close the connection after our DISCONNECT before it is ended regardless.
 * A hop that is there closes within a round trip (RFC 4253 §11.1; sshd exits on it); 5 s is that
 * many times over on a slow link through several hops, and the grace a konnectivity server gets
 * after our CLOSE_REQ — without keeping a shutdown waiting on a jump host that has gone silent.
 */
export const CLOSE_DEADLINE_MS = 5_000;

/**
 * Logs in to `hop` (over `sock` when given, else TCP). When `stop` aborts first, the login is
 * given up: the connection is ended and the promise rejects with the signal's reason. `notices`
 * is the route's record of the agents and keys it has warned about (one for this login alone by
 * default).
 */
export async function login(hop: SshHop, sock: Duplex | undefined, stop: AbortSignal, log?: Logger, notices = new AuthNotices(log)): Promise<Client> {
  let ssh2: Awaited<ReturnType<typeof loadSsh2>>;
  let credentials: ReturnType<typeof loadCredentials>;
  try {
    ssh2 = await loadSsh2();
    // Keys read again at each login (an agent gone since start, a key removed): a failure here
    // must end the transport we were given, or a ProxyCommand would outlive every retry.
    credentials = loadCredentials(hop);
  } catch (err) {
    sock?.destroy();
    throw err;
  }
  const client = new ssh2.Client();
  let refusal: HostKeyRefusal | undefined;
  let agentFailure: Error | undefined;
  /** The IdentityFile being tried (ssh2 tries one method at a time). */
  let identityFile: string | undefined;
  const hostKeyAlgorithms = hostKeyAlgorithmsFor(hop);
  return new Promise<Client>((resolve, reject) => {
    const fail = (err: unknown) => {
      stop.removeEventListener('abort', onStop);
      client.end();
      sock?.destroy();
      reject(err);
    };
    const onStop = () => fail(stop.reason);
    if (stop.aborted) return onStop();
    stop.addEventListener('abort', onStop, { once: true });
    client.once('ready', () => {
      stop.removeEventListener('abort', onStop);
      client.off('close', onClose);
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      // The agent was asked first; no error from it means it answered.
      if (credentials.agentSocket && !agentFailure) notices.agentWorked(hop.alias, credentials.agentSocket);
      if (identityFile) notices.keyWorked(hop.alias, identityFile);
      // ssh2 leaves Nagle on: a stream's small writes (a request, an echo) would wait for the
      // peer's delayed ACK, ~40 ms each. OpenSSH sets TCP_NODELAY too (sshconnect.c).
      if (!sock) client.setNoDelay(true);
      resolve(client);
    });
    client.on('error', (err: Error & { level?: string }) => {
      if (err.level === 'agent') {
        // The agent could not be used (a dead agent's socket left behind, or it would not
        // sign): ssh2 goes on to the next method, the IdentityFiles, as ssh does
        // (sshconnect2.c pubkey_prepare notes the agent error and carries on).
        agentFailure = err;
        notices.agentFailed(hop.alias, credentials.agentSocket!, err);
        return;
      }
      if (!loginFatal(err)) {
        // A key that could not sign (after the hop accepted it): ssh2 goes on to the next.
        notices.keyFailed(hop.alias, identityFile ?? 'an IdentityFile', err);
        return;
      }
      fail(
        refusal ??
          noCommonHostKeyError(err, hop, hostKeyAlgorithms) ??
          hopError(err, hop, undefined, agentFailure && `the ssh-agent at ${credentials.agentSocket} could not be used: ${agentFailure.message}`),
      );
    });
    const onClose = () => fail(refusal ?? hopError(new Error('connection closed during login'), hop));
    client.once('close', onClose);
    client.connect({
      ...(sock ? { sock } : { host: hop.hostName, port: hop.port, ...(hop.family === 4 ? { forceIPv4: true } : hop.family === 6 ? { forceIPv6: true } : {}) }),
      username: hop.user,
      // ssh2 takes `false` for "no more methods" (client.js doNextAuth); its typings leave it out.
      authHandler: authHandler(hop.user, credentials, (file) => (identityFile = file)) as never,
      hostVerifier: (key: Buffer) => {
        refusal = verifyHostKey(hop, key, (file, err) => notices.hostKeyNotSaved(hop.alias, file, err));
        return refusal === undefined;
      },
      // The whole list in order: HostKeyAlgorithms, known_hosts ordering applied (host-key-check.ts).
      algorithms: { serverHostKey: hostKeyAlgorithms },
      keepaliveInterval: hop.serverAliveIntervalMs,
      keepaliveCountMax: hop.serverAliveCountMax,
      readyTimeout: hop.connectTimeoutMs ?? HOP_CONNECT_TIMEOUT_MS,
    });
  });
}

/**
 * Whether an error ssh2 emits during login ends it. ssh2 emits some and carries on with the next
 * authentication method (client.js): level 'agent' (the agent could not be reached or would not
 * sign) and a key that failed to sign ("Error while signing…", level 'client-authentication',
 * which is also the level of the final "All configured authentication methods failed").
 */
function loginFatal(err: Error & { level?: string }): boolean {
  if (err.level === 'agent') return false;
  return !(err.level === 'client-authentication' && /^Error (while signing|signing data)/.test(err.message));
}

/**
 * A direct-tcpip channel to host:port from `client`'s hop, or a rejection with the signal's
 * reason as soon as it aborts. The hop goes on opening the channel (a CHANNEL_OPEN cannot be
 * called off, RFC 4254 §5.1): one confirmed after the abort is closed when it arrives, or the
 * hop would keep its connection to the destination for as long as the chain lives.
 */
export function openChannel(client: Client, host: string, port: number, signal: AbortSignal): Promise<ClientChannel> {
  const opening = forwardOut(client, host, port);
  return abortable(opening, signal).catch((err: unknown) => {
    if (signal.aborted)
      opening.then(
        (late) => late.destroy(),
        () => undefined,
      );
    throw err;
  });
}

function forwardOut(client: Client, host: string, port: number): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    try {
      client.forwardOut('127.0.0.1', 0, host, port, (err, channel) => (err ? reject(err) : resolve(channel)));
    } catch (err) {
      reject(err as Error);
    }
  });
}

/**
 * ProxyCommand: run with the user's shell as ssh does (sshconnect.c: $SHELL -c "exec …"). Its
 * output ends when the command has exited, not at its stdout's EOF, so that a command that failed
 * fails the stream with its exit status and its last line on stderr ("nc: connect to … Connection
 * refused"), which the hop's error then names, instead of a bare "connection lost".
 */
export function proxyCommandStream(command: string, log: Logger | undefined): Duplex {
  const child = spawn(process.env.SHELL || '/bin/sh', ['-c', `exec ${command}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  let lastLine = '';
  child.stderr.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8').trim();
    if (text) lastLine = text.split('\n').at(-1)!.slice(0, 300);
    log?.debug({ proxyCommand: command.split(/\s/)[0], stderr: text.slice(0, 300) }, 'ProxyCommand stderr');
  });
  // Writes to a command that has gone (EPIPE) are answered by its exit below.
  child.stdin.on('error', () => undefined);
  const stream = new Duplex({
    read: () => void child.stdout.resume(),
    write: (chunk: Buffer, _encoding, done) => void child.stdin.write(chunk, () => done()),
    final: (done) => void child.stdin.end(done),
    destroy: (err, done) => {
      child.kill();
      done(err);
    },
  });
  child.stdout.on('data', (chunk: Buffer) => {
    if (!stream.push(chunk)) child.stdout.pause();
  });
  // Whoever takes the stream listens for its errors; until then (or after), one must not be uncaught.
  stream.on('error', () => undefined);
  child.once('error', (err) => stream.destroy(err));
  child.once('close', (code, signal) => {
    if (stream.destroyed) return;
    if (code === 0) return void stream.push(null);
    const how = code !== null ? `exited with status ${code}` : `was ended by ${signal}`;
    stream.destroy(new Error(`ProxyCommand ${how}${lastLine ? `: ${lastLine}` : ''}`));
  });
  return stream;
}

/**
 * Ends a chain's hops, the last first (DISCONNECT, then FIN), and resolves once `closed` has
 * (their connections closed). Hops that have not within `deadlineMs` (a jump host gone silent, a
 * ProxyCommand that outlives its stdin) are ended regardless: the first hop's transport is
 * destroyed, which takes the hops it carries with it. ssh2 cannot do this itself: end() stops its
 * keepalives, and its destroy() does nothing once end() has been called (client.js).
 */
export function endHops(clients: Client[], closed: Promise<unknown>, deadlineMs = CLOSE_DEADLINE_MS): Promise<void> {
  for (const c of [...clients].reverse()) c.end();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      transportOf(clients[0]!)?.destroy();
      resolve();
    }, deadlineMs);
    timer.unref();
  });
  return Promise.race([closed, deadline]).then(() => clearTimeout(timer));
}

/** A hop's transport: ssh2 keeps it as _sock (client.js connect): its TCP socket, or the stream given as `sock`. */
function transportOf(client: Client): Duplex | undefined {
  return (client as unknown as { _sock?: Duplex })._sock;
}

/**
 * Whether the hop answers a keepalive request within `ms`. ssh2 has no public ping with a reply,
 * so this does what its own keepalive does (client.js sendKA): a reply callback queued in order,
 * then `keepalive@openssh.com` with want-reply; success and failure alike are an answer.
 */
export function answersWithin(client: Client, ms: number): Promise<boolean> {
  const inner = client as unknown as { _protocol?: { ping?: () => void }; _callbacks?: Array<() => void> };
  // Another ssh2 than the one this was written against: no verdict, the keepalives judge.
  if (typeof inner._protocol?.ping !== 'function' || !Array.isArray(inner._callbacks)) return Promise.resolve(true);
  if (!transportOf(client)?.writable) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    inner._callbacks!.push(() => {
      clearTimeout(timer);
      resolve(true);
    });
    inner._protocol!.ping!();
  });
}
