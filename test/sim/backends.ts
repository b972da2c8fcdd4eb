// Real TCP backends standing in for the containers of a simulated pod. Each listens on the pod IP
// at the container port (like the pod network namespace's localhost); when that cannot be bound
// (EADDRNOTAVAIL off Linux, EACCES below 1024 without root, EADDRINUSE when another simulator in a
// parallel test process holds the same pod IP and port) it falls back to 127.0.0.1:<ephemeral>,
// and the kubelet dials whatever address is recorded here. Loopback only, always.
//
// Kinds: 'http'   HTTP/1.1 keep-alive (node:http defaults, keepAliveTimeout 5 s):
//                  GET /          200 text "hello from <pod> (<namespace>) port <port>\n"
//                  ANY /whoami    200 JSON {pod, namespace, port, method, path, headers}
//                  GET /bytes/N   200 N bytes from deterministicBytes(N) (see below)
//                  POST /echo     200 echoing the request body
//        'echo'   raw TCP echo, half-close aware (echoes until the client's FIN, then FIN)
//        'banner' writes "banner <pod>\n" on accept, then echoes like 'echo'
//        'none'   nothing listens: the kubelet's dial is refused
//        'external' a real local server the test started (redis-server on a loopback port): the
//                 kubelet dials BackendPort.target, so the pod's port is that server
//        'ingress-http' / 'ingress-https'  the simulated ingress controller (ingress.ts): answers
//                 for the Ingress/Route rule a request's Host and path match; HTTPS terminated
//                 with a simulated-CA certificate chosen by SNI
import http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';
import net from 'node:net';
import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';

export type BackendKind = 'http' | 'echo' | 'banner' | 'none' | 'ingress-http' | 'ingress-https' | 'external';

/** What the ingress-controller backends need from the cluster (ingress.ts SimIngressController). */
export interface IngressBackend {
  handler(pod: PodIdentity, port: number, secure: boolean): http.RequestListener;
  defaultCert(): { key: string; cert: string };
  sniContext(servername: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void): void;
}

export interface BackendPort {
  containerPort: number;
  backend?: BackendKind;
  /** For 'external': the loopback address of the real server behind this port. */
  target?: DialTarget;
}

export interface PodIdentity {
  namespace: string;
  name: string;
  ip: string;
}

export interface DialTarget {
  host: string;
  port: number;
}

/**
 * Deterministic byte stream served by GET /bytes/N: xorshift32 (Marsaglia 2003, shifts 13/17/5)
 * with state seeded to 2463534242; each step updates the state and emits it as 4 bytes
 * little-endian; the stream is cut after N bytes. In JS:
 *   x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; emit x (LE)
 */
export class DeterministicByteStream {
  private state = 2463534242;
  private carry = Buffer.alloc(0);

  next(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    if (this.carry.length) {
      const k = Math.min(n, this.carry.length);
      this.carry.copy(out, 0, 0, k);
      this.carry = this.carry.subarray(k);
      off = k;
    }
    let x = this.state;
    while (off + 4 <= n) {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      out.writeUInt32LE(x, off);
      off += 4;
    }
    if (off < n) {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      const word = Buffer.allocUnsafe(4);
      word.writeUInt32LE(x, 0);
      word.copy(out, off, 0, n - off);
      this.carry = word.subarray(n - off);
      off = n;
    }
    this.state = x;
    return out;
  }
}

/** Writes deterministicBytes(n) to `out` in 64 KiB pieces, minding backpressure, then ends it; `onPiece` counts. */
export function sendDeterministicBytes(out: Writable, n: number, onPiece?: (bytes: number) => void): void {
  const gen = new DeterministicByteStream();
  let left = n;
  const pump = (): void => {
    while (left > 0) {
      const k = Math.min(left, 64 * 1024);
      left -= k;
      onPiece?.(k);
      if (!out.write(gen.next(k))) return void out.once('drain', pump);
    }
    out.end();
  };
  pump();
}

export function deterministicBytes(n: number): Buffer {
  return new DeterministicByteStream().next(n);
}

/** sha256 hex of deterministicBytes(n), computed in chunks (fine for gigabytes). */
export function deterministicSha256(n: number): string {
  const gen = new DeterministicByteStream();
  const h = createHash('sha256');
  for (let left = n; left > 0;) {
    const k = Math.min(left, 1 << 20);
    h.update(gen.next(k));
    left -= k;
  }
  return h.digest('hex');
}

function httpHandler(pod: PodIdentity, port: number): http.RequestListener {
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://backend');
    const bytes = url.pathname.match(/^\/bytes\/(\d+)$/);
    if (url.pathname === '/whoami') {
      req.resume();
      req.on('end', () => {
        const body = JSON.stringify({ pod: pod.name, namespace: pod.namespace, port, method: req.method, path: req.url, headers: req.headers });
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      });
    } else if (bytes && (req.method === 'GET' || req.method === 'HEAD')) {
      req.resume();
      const n = Number(bytes[1]);
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': n });
      if (req.method === 'HEAD') return void res.end();
      sendDeterministicBytes(res, n);
    } else if (url.pathname === '/echo' && req.method === 'POST') {
      const headers: http.OutgoingHttpHeaders = { 'Content-Type': req.headers['content-type'] ?? 'application/octet-stream' };
      if (req.headers['content-length'] !== undefined) headers['Content-Length'] = req.headers['content-length'];
      res.writeHead(200, headers);
      req.pipe(res);
    } else if (url.pathname === '/') {
      req.resume();
      const body = `hello from ${pod.name} (${pod.namespace}) port ${port}\n`;
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    } else {
      req.resume();
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': 10 });
      res.end('not found\n');
    }
  };
}

interface Listener {
  port: number;
  kind: BackendKind;
  server?: net.Server;
  target?: DialTarget;
  sockets: Set<net.Socket>;
}

function listen(server: net.Server, host: string, port: number): Promise<DialTarget> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen({ host, port, exclusive: true }, () => {
      server.removeListener('error', onError);
      const a = server.address() as net.AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

function isLoopbackV4(ip: string): boolean {
  return net.isIPv4(ip) && ip.startsWith('127.');
}

export class PodBackends {
  private readonly listeners = new Map<number, Listener>();

  private constructor(
    readonly pod: PodIdentity,
    private readonly ingress?: IngressBackend,
    private readonly bindPodIp = true,
  ) {}

  /** `bindPodIp: false`: listen on 127.0.0.1:<ephemeral> only, never on the pod IP (a guest cluster's pods). */
  static async start(pod: PodIdentity, ports: BackendPort[], ingress?: IngressBackend, bindPodIp = true): Promise<PodBackends> {
    const b = new PodBackends(pod, ingress, bindPodIp);
    try {
      for (const p of ports) await b.add(p.containerPort, p.backend ?? 'http', p.target);
    } catch (e) {
      await b.stop();
      throw e;
    }
    return b;
  }

  private async add(port: number, kind: BackendKind, external?: DialTarget): Promise<void> {
    const l: Listener = { port, kind, sockets: new Set() };
    this.listeners.set(port, l);
    if (kind === 'none') return;
    if (kind === 'external') {
      if (!external || !isLoopbackV4(external.host)) throw new Error(`an external backend needs a loopback target, got ${JSON.stringify(external)}`);
      l.target = external;
      return;
    }
    const make = (): net.Server => {
      let server: net.Server;
      if (kind === 'http') {
        server = http.createServer(httpHandler(this.pod, port));
      } else if (kind === 'ingress-http' || kind === 'ingress-https') {
        const ingress = this.ingress;
        if (!ingress) throw new Error(`${kind} backend without an ingress controller`);
        server =
          kind === 'ingress-http'
            ? http.createServer(ingress.handler(this.pod, port, false))
            : https.createServer({ ...ingress.defaultCert(), SNICallback: (name, cb) => ingress.sniContext(name, cb) }, ingress.handler(this.pod, port, true));
        server.on('tlsClientError', () => {});
      } else {
        server = net.createServer({ allowHalfOpen: true }, (s) => {
          if (kind === 'banner') s.write(`banner ${this.pod.name}\n`);
          s.pipe(s);
        });
      }
      server.on('connection', (s: net.Socket) => {
        l.sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => l.sockets.delete(s));
      });
      return server;
    };
    if (this.bindPodIp && isLoopbackV4(this.pod.ip)) {
      const server = make();
      try {
        l.target = await listen(server, this.pod.ip, port);
        l.server = server;
        return;
      } catch {
        server.close();
      }
    }
    const server = make();
    l.target = await listen(server, '127.0.0.1', 0);
    l.server = server;
  }

  /** Where the kubelet dials for this container port; undefined = nothing listens. */
  target(port: number): DialTarget | undefined {
    return this.listeners.get(port)?.target;
  }

  /** Resets (TCP RST) every accepted connection, as a crashing container would; listeners stay. */
  resetConnections(): number {
    let n = 0;
    for (const l of this.listeners.values()) {
      for (const s of l.sockets) {
        s.resetAndDestroy();
        n++;
      }
    }
    return n;
  }

  async stop(): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const l of this.listeners.values()) {
      if (l.server) {
        const server = l.server;
        closing.push(new Promise((r) => server.close(() => r())));
      }
      for (const s of l.sockets) s.destroy();
      l.target = undefined;
    }
    await Promise.all(closing);
  }
}
