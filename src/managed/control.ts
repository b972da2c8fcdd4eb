// The daemon's private control channel: a unix socket (0600, in its 0700 proxy directory) that
// speaks newline-delimited JSON. One request per line, one response line each (a client that
// sends requests and reads no answers is cut off once MAX_UNSENT_FEED_BYTES wait for it):
//   {"cmd":"status"}  →  {"ok":true,"status":{…live figures…}}
//   {"cmd":"stop"}    →  {"ok":true}  and the daemon drains and exits as on SIGTERM
//   {"cmd":"reload"}  →  {"ok":true}  once the table `reload` left is in force
//   {"cmd":"pac"}     →  {"ok":true,"pac":"…"}  the PAC file it serves at /proxy.pac
//   {"cmd":"watch"}   →  the live feed (ui/feed.ts), one message a line: a snapshot, then events
//                        until the client closes (a client that reads too slowly is cut off)
//   anything else     →  {"ok":false,"error":"…"}
import net from 'node:net';
import { chmodSync, unlinkSync } from 'node:fs';
import type { ListenAddress } from './store.js';
import type { StreamTotals } from '../listeners/stream-stats.js';
import type { CacheStatus } from '../cluster/cache.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';
import type { RouteStatus } from '../routes/route.js';
import { isNamedPipe } from '../state/paths.js';
import { MAX_UNSENT_FEED_BYTES, type FeedMessage, type FeedSubscriber } from '../ui/feed.js';
import { controlSocketRefusal } from './control-owner.js';

const MAX_LINE = 4096;

export interface LiveStatus {
  pid: number;
  /** starting: the cache is still on its first sync (the listeners may not be up yet). */
  phase: 'starting' | 'running' | 'stopping';
  uptimeMs: number;
  totals: StreamTotals;
  /** Each route of the routing table: kind, state (and why), kind-specific figures. */
  routes?: RouteStatus[];
  cache?: CacheStatus;
  transports?: PodTransportStats[];
  /** Mistakes found at start that do not stop it (RunningProxy.warnings). */
  warnings?: readonly string[];
  /** While starting: where its listeners are bound already (state.json records them once it runs). */
  listening?: { socks?: ListenAddress; http?: ListenAddress; forwards: Array<{ address: ListenAddress; target: string }> };
}

/** reload's createdAt: the entry it was prepared for (a daemon started for another refuses it). */
export type ControlRequest = { cmd: 'status' } | { cmd: 'stop' } | { cmd: 'reload'; createdAt?: string } | { cmd: 'pac' } | { cmd: 'watch' };
export type ControlResponse = { ok: true; status?: LiveStatus; pac?: string } | { ok: false; error: string };

export interface ControlHandlers {
  status(): LiveStatus;
  stop(): void;
  /** Takes the routing table `reload` left in the proxy's directory; rejects with why it did not. */
  reload?(request: { createdAt?: string }): Promise<void>;
  /** The PAC file the proxy serves (RunningProxy.pac); throws why there is none. */
  pac?(): string;
  /** Subscribes to the live feed (RunningProxy.watch); throws why it cannot (still starting). */
  watch?(subscriber: FeedSubscriber): () => void;
}

/** A control server; closeWithin stops accepting and cuts off connections still open after waitMs. */
export type ControlServer = net.Server & { closeWithin(waitMs: number): Promise<void> };

/**
 * Listens on socketPath (replacing a stale socket file) with mode 0600; on Windows a named pipe
 * (state/paths.ts controlEndpoint), which leaves nothing behind and has no file mode: its default
 * security gives full access to its creator, administrators and SYSTEM only.
 */
export async function startControlServer(socketPath: string, handlers: ControlHandlers): Promise<ControlServer> {
  const pipe = isNamedPipe(socketPath);
  if (!pipe) {
    try {
      unlinkSync(socketPath);
    } catch {
      /* none left over */
    }
  }
  const clients = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    clients.add(socket);
    socket.on('close', () => clients.delete(socket));
    socket.setEncoding('utf8');
    let buffered = '';
    socket.on('error', () => undefined);
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      if (buffered.length > MAX_LINE && !buffered.includes('\n')) {
        socket.end(`${JSON.stringify({ ok: false, error: 'request too long' })}\n`);
        return;
      }
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line === '') continue;
        const req = parseRequest(line);
        if (req?.cmd === 'watch') return watch(socket, handlers);
        void respond(req, handlers).then((answer) => answerTo(socket, answer));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  if (!pipe) chmodSync(socketPath, 0o600);
  const closeWithin = (waitMs: number) =>
    new Promise<void>((resolve) => {
      // A client that sends nothing (or waits on an answer that will not come) must not hold a stop.
      const cutOff = setTimeout(() => clients.forEach((s) => s.destroy()), waitMs);
      server.close(() => {
        clearTimeout(cutOff);
        resolve();
      });
    });
  return Object.assign(server, { closeWithin });
}

/** A client that sends requests and reads no answer is cut off, as a feed subscriber that falls behind. */
function answerTo(socket: net.Socket, answer: ControlResponse): void {
  if (socket.destroyed) return;
  if (socket.writableLength > MAX_UNSENT_FEED_BYTES) return void socket.destroy();
  socket.write(`${JSON.stringify(answer)}\n`);
}

type ParsedRequest = { cmd?: unknown; createdAt?: unknown } | null;

/** A request line as JSON, or undefined when it is not JSON. */
function parseRequest(line: string): ParsedRequest | undefined {
  try {
    return JSON.parse(line) as ParsedRequest;
  } catch {
    return undefined;
  }
}

/** The connection becomes the feed's: nothing more is read from it. */
function watch(socket: net.Socket, handlers: ControlHandlers): void {
  socket.removeAllListeners('data');
  socket.pause();
  let unsubscribe: (() => void) | undefined;
  try {
    if (!handlers.watch) throw new Error('this proxy has no live feed');
    unsubscribe = handlers.watch((message) => {
      if (socket.destroyed) return;
      if (socket.writableLength > MAX_UNSENT_FEED_BYTES) return void socket.destroy();
      socket.write(`${JSON.stringify(message)}\n`);
    });
  } catch (err) {
    socket.end(`${JSON.stringify({ ok: false, error: err instanceof Error ? err.message : String(err) })}\n`);
    return;
  }
  socket.once('close', () => unsubscribe?.());
  if (socket.destroyed) unsubscribe();
}

async function respond(req: ParsedRequest | undefined, handlers: ControlHandlers): Promise<ControlResponse> {
  if (req === undefined) return { ok: false, error: 'not JSON' };
  switch (req?.cmd) {
    case 'status':
      return { ok: true, status: handlers.status() };
    case 'stop':
      // Answer first; the drain starts on the next tick.
      setImmediate(() => handlers.stop());
      return { ok: true };
    case 'reload':
      if (!handlers.reload) return { ok: false, error: 'this proxy cannot reload' };
      try {
        await handlers.reload({ createdAt: typeof req.createdAt === 'string' ? req.createdAt : undefined });
        return { ok: true };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err) };
      }
    case 'pac':
      if (!handlers.pac) return { ok: false, error: 'this proxy has no PAC file' };
      try {
        return { ok: true, pac: handlers.pac() };
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err) };
      }
    default:
      return { ok: false, error: unknownCommand(req?.cmd) };
  }
}

/** The answer to a command this daemon does not know; a daemon of an earlier version gives it for commands added since. */
export function unknownCommand(cmd: unknown): string {
  return `unknown command ${JSON.stringify(cmd)}`;
}

/** Sends one request and waits for its response line; rejects on timeout or a closed socket. */
export function controlRequest(socketPath: string, request: ControlRequest, timeoutMs = 2_000): Promise<ControlResponse> {
  return new Promise((resolve, reject) => {
    const refusal = controlSocketRefusal(socketPath);
    if (refusal) return reject(new Error(refusal));
    const socket = net.connect(socketPath);
    let buffered = '';
    const timer = setTimeout(() => socket.destroy(new Error(`no answer from ${socketPath} within ${timeoutMs} ms`)), timeoutMs);
    const finish = (err: Error | undefined, value?: ControlResponse) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      try {
        finish(undefined, JSON.parse(buffered.slice(0, nl)) as ControlResponse);
      } catch (err) {
        finish(err as Error);
      }
    });
    socket.on('error', (err) => finish(err));
    socket.on('close', () => finish(new Error(`${socketPath} closed without an answer`)));
  });
}

/** Live status of a daemon, or undefined when it does not answer. */
export async function queryStatus(socketPath: string, timeoutMs?: number): Promise<LiveStatus | undefined> {
  try {
    const res = await controlRequest(socketPath, { cmd: 'status' }, timeoutMs);
    return res.ok ? res.status : undefined;
  } catch {
    return undefined;
  }
}

export interface Watch {
  /** Resolves when the feed ends, with why (the daemon stopped, refused, or close() was called). */
  readonly ended: Promise<string>;
  close(): void;
}

/** Follows a daemon's live feed: each message to onMessage, in order. */
export function watchProxy(socketPath: string, onMessage: (message: FeedMessage) => void): Watch {
  const refusal = controlSocketRefusal(socketPath);
  if (refusal) return { ended: Promise.resolve(refusal), close: () => undefined };
  const socket = net.connect(socketPath);
  let buffered = '';
  let why = 'the proxy closed its feed';
  socket.setEncoding('utf8');
  socket.on('connect', () => socket.write(`${JSON.stringify({ cmd: 'watch' })}\n`));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      let message: FeedMessage | { ok: false; error: string };
      try {
        message = JSON.parse(line) as FeedMessage | { ok: false; error: string };
      } catch {
        why = 'the proxy sent a line that is not JSON';
        socket.destroy();
        return;
      }
      if ('ok' in message) {
        why = message.error;
        socket.destroy();
        return;
      }
      onMessage(message);
    }
  });
  const ended = new Promise<string>((resolve) => {
    socket.on('error', (err) => (why = err.message));
    socket.on('close', () => resolve(why));
  });
  return {
    ended,
    close: () => {
      why = 'closed';
      socket.destroy();
    },
  };
}
