// Plumbing shared by the SOCKS and HTTP listeners: listening with clear startup errors,
// tracking client sockets for graceful shutdown, and holding a client while its stream opens.
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { StartupError } from '../core/errors.js';
import { formatHostPort } from '../core/address.js';
import { requireCredentialsOnBoundAddress } from '../auth/credentials.js';
import type { Logger } from '../core/log.js';
import type { OpenRequest, OpenedStream, StreamOpener } from '../core/types.js';
import { UNIX_SOURCE } from '../auth/source.js';
import { listenUnix } from './unix-socket.js';
import type { ConnectionBudget } from './connection-budget.js';

const noop = (): void => {};

/**
 * Buffer size of accepted client sockets, both ways. Node 20's default, 16 KiB, is half a SPDY
 * DATA frame: writing each frame would fill the client socket and pause the relay, and the next
 * frame, reaching a paused stream, would be joined by a copy (relay.ts Side.forward,
 * core/stream-pieces.ts).
 */
export const CLIENT_SOCKET_HIGH_WATER = 64 * 1024;

/** Sockets accepted on a unix-socket listener: they have no remote address (unix-socket.ts). */
const unixClients = new WeakSet<net.Socket>();

/** Call on accept in a unix-socket listener, before anything reads the client's address. */
export function markUnixClient(socket: net.Socket): void {
  unixClients.add(socket);
}

/** The client as logs name it: "ip:port", or "unix" for a unix-socket client. */
export function clientName(socket: net.Socket): string {
  if (unixClients.has(socket)) return UNIX_SOURCE;
  // A dual-stack listener ([::]) sees IPv4 clients as ::ffff:a.b.c.d (RFC 4291 §2.5.5.2): named as the IPv4 address they are.
  const address = socket.remoteAddress?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1');
  return formatHostPort(address ?? 'unknown', socket.remotePort ?? 0);
}

/** The address the auth throttle and the unauthenticated-connection cap key by (auth/source.ts). */
export function clientSource(socket: net.Socket): string | undefined {
  return unixClients.has(socket) ? UNIX_SOURCE : socket.remoteAddress;
}

/** What a taken port's line ends with, when nothing says who holds it (cli/port-owner.ts does, for a managed proxy). */
export const IN_USE_HINT = ' (is another proxy running? pick another port)';

function explainListenError(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'EADDRINUSE':
      return `address already in use${IN_USE_HINT}`;
    case 'EACCES':
      return 'permission denied (ports below 1024 need privileges)';
    case 'EADDRNOTAVAIL':
      return 'address not available on this machine';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name does not resolve';
    default:
      return err.message;
  }
}

/** Where a unix-socket listener listens: an absolute path (listeners/unix-socket.ts). */
export interface UnixListen {
  unix: string;
}

export interface ListenPolicy {
  /** The flag that set this address, for messages (--listen-socks, --listen-http). */
  flag: string;
  /** Without proxy credentials the address bound must be loopback, whatever the host text said. */
  hasCredentials: boolean;
}

/**
 * Listens, resolving with the bound address or rejecting with a StartupError naming it. With a
 * policy, a listener that bound a non-loopback address without credentials is closed again and
 * refused (a `*.localhost` name may resolve anywhere).
 */
export async function listenOn(server: net.Server, host: string | UnixListen, port: number, what: string, policy?: ListenPolicy): Promise<AddressInfo> {
  if (typeof host !== 'string') {
    // A unix socket is local by construction: no credentials needed (its file mode keeps others out).
    server.prependListener('connection', markUnixClient);
    return listenUnix(server, host.unix, what, policy?.flag ?? what);
  }
  const bound = await bind(server, host, port, what);
  if (!policy) return bound;
  try {
    requireCredentialsOnBoundAddress(policy.flag, host, bound, policy.hasCredentials);
  } catch (err) {
    await new Promise((r) => server.close(r));
    throw err;
  }
  return bound;
}

function bind(server: net.Server, host: string, port: number, what: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      const where = formatHostPort(host, port);
      reject(new StartupError(`cannot listen for ${what} on ${where}: ${explainListenError(err)}`, { cause: err }));
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen({ host, port });
  });
}

/** The client sockets of one listener, so close() can wait for them and then cut them off. */
export class ClientTracker {
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly log: Logger,
    private readonly budget?: ConnectionBudget,
  ) {}

  /**
   * Call first thing on accept: the 'error' listener keeps resets out of 'uncaughtException'.
   * False: the connection budget is spent and the socket was closed; leave it alone.
   */
  add(socket: net.Socket): boolean {
    if (this.budget && !this.budget.take(socket)) return false;
    this.sockets.add(socket);
    socket.on('error', (err: NodeJS.ErrnoException) => this.log.debug({ code: err.code }, `client socket error: ${err.message}`));
    socket.on('close', () => {
      this.sockets.delete(socket);
      this.budget?.release();
    });
    return true;
  }

  get size(): number {
    return this.sockets.size;
  }

  destroyAll(): void {
    for (const s of this.sockets) s.destroy();
  }

  /**
   * Waits until no client is left or graceMs passed; `tick` runs every poll (the HTTP listener
   * uses it to close keep-alive connections that went idle during the grace period).
   */
  async drain(graceMs: number, tick: () => void = noop): Promise<void> {
    const deadline = Date.now() + Math.max(0, graceMs);
    while (this.sockets.size > 0 && Date.now() < deadline) {
      tick();
      await new Promise((r) => setTimeout(r, Math.min(50, Math.max(1, deadline - Date.now()))));
    }
    const closing = [...this.sockets].map((s) => new Promise((r) => s.once('close', r)));
    this.destroyAll();
    await Promise.all(closing);
  }
}

/** Stops accepting at once, lets clients finish for graceMs, then destroys the rest. */
export async function closeServer(server: net.Server, tracker: ClientTracker, graceMs: number, tick?: () => void): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  await tracker.drain(graceMs, tick);
  await closed;
}

export interface HeldClient {
  /** True once the client closed, half-closed or failed while we were waiting. */
  readonly gone: boolean;
  /** Stops holding: the socket is left paused; returns the bytes it sent meanwhile. */
  release(): Buffer;
}

/**
 * Keeps reading a client while its upstream stream is being opened: a paused socket would not
 * notice the client leaving (no EOF or reset is read), and the bytes it pipelines must be kept
 * for the upstream. A FIN before our reply counts as leaving: no client half-closes before it
 * knows whether its tunnel exists — except on a plain port mapping, whose client never hears of a
 * tunnel and may send its request and FIN at once (`finIsGone` false: only a close counts).
 * Reading stops at `maxBuffered` so memory stays bounded.
 */
export function holdWhileOpening(socket: net.Socket, onGone: () => void, maxBuffered = 256 * 1024, finIsGone = true): HeldClient {
  return new HeldWhileOpening(socket, onGone, maxBuffered, finIsGone);
}

/**
 * A class, not an object literal with `get gone()`: V8 makes every such literal a dictionary-mode
 * object, and with its getter it kept what the getter closes over (here the socket and the whole
 * connection) alive through young-generation collections until the next mark-compact. Measured
 * with --trace-gc-nvp on short SOCKS connections to a plain TCP upstream (scratch): ~8 KB per
 * connection was copied by a scavenge with the literal, ~3.7 KB with this class, scavenges 4.2 ms
 * against 2.4 ms (docs/performance.md, "What a lingering connection holds").
 */
class HeldWhileOpening implements HeldClient {
  gone = false;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly onEnd: () => void;

  constructor(
    private readonly socket: net.Socket,
    private readonly onGone: () => void,
    private readonly maxBuffered: number,
    finIsGone: boolean,
  ) {
    this.onEnd = finIsGone ? this.markGone : noop;
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.markGone);
    if (socket.destroyed || (finIsGone && socket.readableEnded)) this.markGone();
    else socket.resume();
  }

  private readonly markGone = (): void => {
    if (this.gone) return;
    this.gone = true;
    this.onGone();
  };

  private readonly onData = (chunk: Buffer): void => {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size >= this.maxBuffered) this.socket.pause();
  };

  release(): Buffer {
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.markGone);
    this.socket.pause();
    return Buffer.concat(this.chunks);
  }
}

/**
 * Sends a final message and closes gracefully: FIN after the reply, then read and discard until
 * the client closes (closing with unread input would send a RST that can overtake the reply).
 */
export function endWithReply(socket: net.Socket, reply: Buffer | string, lingerMs = 2000): void {
  if (socket.destroyed) return;
  socket.removeAllListeners('data');
  socket.on('data', noop);
  socket.end(reply);
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/** What openHeld found: the stream and the client's bytes so far, or why it could not open. */
export type HeldOpen = { opened: OpenedStream; head: Buffer } | { failed: unknown };

/**
 * Opens the stream for a client while holding it (holdWhileOpening). A client that left
 * meanwhile is closed here — and a stream that opened for it is destroyed — with a debug line
 * naming `what` ("SOCKS client", …); the caller then gets undefined and has nothing to answer.
 */
export async function openHeld(
  opener: StreamOpener,
  log: Logger,
  socket: net.Socket,
  request: Omit<OpenRequest, 'signal'>,
  what: string,
  finIsGone = true,
): Promise<HeldOpen | undefined> {
  const abort = new AbortController();
  const held = holdWhileOpening(socket, () => abort.abort(new Error('client disconnected')), undefined, finIsGone);
  let opened: OpenedStream;
  try {
    opened = await opener.open({ ...request, signal: abort.signal });
  } catch (err) {
    held.release();
    if (!held.gone) return { failed: err };
    log.debug({ client: request.client }, `${what} left while its stream was opening`);
    socket.destroy();
    return undefined;
  }
  const head = held.release();
  if (!held.gone) return { opened, head };
  log.debug({ client: request.client, via: opened.via }, `${what} left before its stream opened; closing the stream`);
  opened.stream.on('error', noop);
  opened.stream.destroy();
  socket.destroy();
  return undefined;
}

/** HTTP connections answered (or about to be) with `Connection: close`: what follows on them is not acted on. */
export const closingAfterAnswer = new WeakSet<object>();

/** Per client connection, the requests to abandon if it closes (one 'close' listener each). */
const owed = new WeakMap<net.Socket, Set<() => void>>();

/** Runs `gone` if `socket` closes before the returned function is called. */
export function whenClientCloses(socket: net.Socket, gone: () => void): () => void {
  let pending = owed.get(socket);
  if (!pending) {
    const set = (pending = new Set());
    owed.set(socket, set);
    socket.once('close', () => set.forEach((fn) => fn()));
  }
  pending.add(gone);
  return () => pending.delete(gone);
}
