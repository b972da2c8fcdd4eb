// Fuzz target: the HTTP proxy front end as a whole — Node's request head parser (llhttp) and our
// handlers on top of it (http-server.ts: limits, CONNECT, clientError; http-auth.ts:
// Proxy-Authorization; http-forward.ts: absolute-form and header handling; RFC 9112/9110) —
// over real sockets on 127.0.0.1 to two in-process listeners, one with proxy authentication.
// Upstreams live in memory: web.test answers any request, echo.test echoes, slow.test times out,
// anything else is refused as the router would refuse it. Findings: an error-level log line (the
// catch-alls for unexpected failures), a failure that maps to no typed error ("internal"), an
// uncaught exception (the worker dies), or a connection still open 3 s after the client finished.
import net from 'node:net';
import { Duplex, PassThrough } from 'node:stream';
import { pino } from 'pino';
import { ConnectTimeoutError, NotAllowedError } from '../../../src/core/errors.js';
import type { OpenRequest, OpenedStream, StreamOpener } from '../../../src/core/types.js';
import { ProxyAuth } from '../../../src/auth/credentials.js';
import { StreamStats } from '../../../src/listeners/stream-stats.js';
import type { Listener, ListenerContext } from '../../../src/listeners/listener.js';
import { startHttpListener } from '../../../src/listeners/http-server.js';
import type { FuzzTarget } from '../engine.js';

const HANG_MS = 3000;
const LOOPBACK = '127.0.0.1';

/** An origin that answers the first request head it sees, then closes. */
function origin(): Duplex {
  let head = '';
  let answered = false;
  const d = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      if (!answered) {
        head += chunk.toString('latin1');
        if (head.includes('\r\n\r\n')) {
          answered = true;
          d.push('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
          d.push(null);
        }
      }
      cb();
    },
    final(cb) {
      if (!answered) d.push(null);
      cb();
    },
  });
  return d;
}

const opener: StreamOpener = {
  async open(req: OpenRequest): Promise<OpenedStream> {
    switch (req.destination.host) {
      case 'web.test':
        return { stream: origin(), via: 'fuzz/web' };
      case 'echo.test':
        return { stream: new PassThrough(), via: 'fuzz/echo' };
      case 'slow.test':
        await new Promise((r) => setTimeout(r, 20));
        throw new ConnectTimeoutError('slow.test never answers');
      default:
        throw new NotAllowedError(`${req.destination.host} is not a fuzz upstream`);
    }
  },
};

const errorLines: string[] = [];
const log = pino({ level: 'error' }, { write: (line: string) => void errorLines.push(line) });
const stats = new StreamStats(log);
const plain: ListenerContext = { opener, stats, log, handshakeTimeoutMs: 500 };
const withAuth: ListenerContext = { ...plain, auth: new ProxyAuth({ username: 'fuzz', password: 'fuzz' }) };
const listeners: Listener[] = [];
const CHUNKINGS = [Infinity, 0.5, 16, 1];

class Finding extends Error {}

function send(port: number, data: Buffer, chunking: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: LOOPBACK, port, allowHalfOpen: true });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Finding(`hang: the connection is still open ${HANG_MS} ms after the client finished`));
    }, HANG_MS);
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    // Our FIN after the input, and after the proxy's FIN: a well-behaved client, a hostile request.
    s.once('end', () => s.end());
    s.once('connect', () => {
      const size = chunking === 0.5 ? Math.ceil(data.length / 2) : chunking;
      for (let off = 0; off < data.length; off += size) s.write(data.subarray(off, Math.min(data.length, off + size)));
      s.end();
    });
  });
}

export const httpTarget: FuzzTarget = {
  name: 'http',
  maxLen: 4096,
  dictionary: [
    'CONNECT ',
    'GET ',
    'POST ',
    ' HTTP/1.1\r\n',
    ' HTTP/1.0\r\n',
    '\r\n',
    '\r\n\r\n',
    'http://',
    'https://',
    'web.test:80',
    'echo.test:7',
    'slow.test:1',
    'example.com:443',
    '[::1]:80',
    ':8080',
    '/',
    '?',
    '#',
    '@',
    '%00',
    '..',
    'Host: ',
    'Connection: close',
    'Connection: keep-alive',
    'Proxy-Connection: ',
    'Content-Length: ',
    'Transfer-Encoding: chunked',
    'Expect: 100-continue',
    'Upgrade: websocket',
    'Keep-Alive: timeout=1',
    'Proxy-Authorization: Basic ZnV6ejpmdXp6',
    'Proxy-Authorization: Basic ',
    'Proxy-Authorization: Digest ',
    '0\r\n\r\n',
    'ffffffff\r\n',
  ].map((s) => Buffer.from(s, 'latin1')),
  include: (url) => url.includes('/dist/src/') || url.startsWith('node:_http'),
  async setup() {
    for (const ctx of [plain, withAuth]) listeners.push(await startHttpListener(LOOPBACK, 0, ctx, { upstreamIdleMs: 50 }));
  },
  async run(input) {
    if (input.length === 0) return;
    const control = input[0]!;
    const listener = listeners[control & 1]!;
    const internalBefore = stats.snapshot().failuresByReason.internal ?? 0;
    errorLines.length = 0;
    await send(listener.address.port, input.subarray(1), CHUNKINGS[(control >> 1) & 3]!);
    if (errorLines.length > 0) throw new Finding(`error-level log line: ${errorLines.join('')}`);
    const internal = (stats.snapshot().failuresByReason.internal ?? 0) - internalBefore;
    if (internal > 0) throw new Finding('a request failed with an untyped error (reason "internal")');
  },
  async teardown() {
    await Promise.all(listeners.splice(0).map((l) => l.close(0)));
  },
};
