// Shared fixtures for the front-end tests (SOCKS, HTTP). It holds no tests itself; it is named
// *.test.ts only so it lives beside the suites that import it. Everything listens on 127.0.0.1.
import net from 'node:net';
import { once } from 'node:events';
import { pino } from 'pino';
import { StreamStats } from '../../src/listeners/stream-stats.js';
import type { ListenerContext } from '../../src/listeners/listener.js';
import type { OpenRequest, OpenedStream, StreamOpener } from '../../src/core/types.js';

export const LOOPBACK = '127.0.0.1';

export function quietContext(opener: StreamOpener, handshakeTimeoutMs = 2000): ListenerContext {
  const log = pino({ level: 'silent' });
  return { opener, stats: new StreamStats(log), log, handshakeTimeoutMs };
}

/** A TCP echo server; it half-closes back when the client half-closes. */
export async function startEcho(): Promise<{ port: number; close: () => void }> {
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  server.listen(0, LOOPBACK);
  await once(server, 'listening');
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

/** Opens a real TCP stream to 127.0.0.1:port, as the core would hand back a tunnel. */
export async function tcpStream(port: number, via = `local:${port}`): Promise<OpenedStream> {
  const stream = net.connect({ host: LOOPBACK, port, allowHalfOpen: true });
  await once(stream, 'connect');
  return { stream, via };
}

type Route = (req: OpenRequest) => Promise<OpenedStream>;

/** Routes by destination host; records every request it was given. */
export class FakeOpener implements StreamOpener {
  readonly requests: OpenRequest[] = [];
  constructor(
    private readonly routes: Record<string, Route>,
    private readonly fallback?: Route,
  ) {}

  async open(req: OpenRequest): Promise<OpenedStream> {
    this.requests.push(req);
    const route = this.routes[req.destination.host] ?? this.fallback;
    if (!route) throw new Error(`no route for ${req.destination.host}`);
    return route(req);
  }
}

export async function connectClient(port: number): Promise<net.Socket> {
  const s = net.connect({ host: LOOPBACK, port, allowHalfOpen: true });
  s.on('error', () => {});
  await once(s, 'connect');
  return s;
}

/** Buffered reader over a socket: exact-length reads and end detection, with timeouts. */
export class Reader {
  private buf = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | undefined;

  constructor(readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.wake?.();
    });
    const onEnd = (): void => {
      this.ended = true;
      this.wake?.();
    };
    socket.on('end', onEnd);
    socket.on('close', onEnd);
  }

  private async waitUntil(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (have ${this.buf.length} bytes, ended=${this.ended})`);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 20);
      });
    }
  }

  async read(n: number, timeoutMs = 3000): Promise<Buffer> {
    await this.waitUntil(() => this.buf.length >= n || this.ended, timeoutMs, `${n} bytes`);
    if (this.buf.length < n) throw new Error(`connection ended after ${this.buf.length} of ${n} bytes`);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Everything until the peer ends or closes. */
  async rest(timeoutMs = 3000): Promise<Buffer> {
    await this.waitUntil(() => this.ended, timeoutMs, 'end of stream');
    const out = this.buf;
    this.buf = Buffer.alloc(0);
    return out;
  }

  get isEnded(): boolean {
    return this.ended;
  }
}

export async function waitFor(cond: () => boolean, timeoutMs = 3000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A client that sends its whole request, body and all, before it reads a byte — as Python's
 * http.client does. Returns what it then read and the socket error it met, if any.
 */
export async function uploadThenRead(port: number, head: string, body: Buffer): Promise<{ response: string; error?: string }> {
  const s = net.connect({ host: LOOPBACK, port });
  s.pause();
  let error: string | undefined;
  s.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
  await once(s, 'connect');
  s.write(head);
  await new Promise<void>((resolve) => s.write(body, () => resolve()));
  let response = '';
  s.on('data', (c: Buffer) => (response += c.toString('latin1')));
  s.resume();
  if (!s.destroyed) await once(s, 'close');
  return { response, error };
}
