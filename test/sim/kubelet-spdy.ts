// SPDY/3.1 pod port-forward, as the API server + kubelet + container runtime serve it, both ways in:
//  - tunnelled: a WebSocket offering "SPDY/3.1+portforward.k8s.io" (kubectl >= 1.31 tries this
//    first): staging/src/k8s.io/apiserver/pkg/util/proxy/streamtunnel.go turns it into the SPDY
//    POST to the kubelet and, on the kubelet's 101, upgrades the WebSocket with that subprotocol;
//    any other kubelet answer passes through. `tunnel = false` makes a 1.29-like server, where the
//    WebSocket goes to the kubelet's v4 handler instead (400 `query parameter "port" is required`).
//  - plain: `POST` with `Connection: Upgrade`, `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version`
//    (apimachinery pkg/util/httpstream/{httpstream.go Handshake, spdy/upgrade.go}).
// The session (staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/httpstream.go): streams
// need `port` (1–65535) and `streamtype` error|data, else RST; SYN_REPLY with empty headers at once;
// pairs by `requestid` (old clients: derived from the stream id); dials only when both arrived; an
// unpaired request gets "timed out waiting for streams" after the stream creation timeout (30 s).
// The runtime (containerd internal/cri/server/sandbox_portforward_linux.go) copies both ways; once
// one direction ends it waits at most closeGraceMs for the other, then closes: FIN on both streams.
// A failed dial or a reset pod connection: the error text on the error stream, then RST on both.
import net from 'node:net';
import { appendFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { SpdySession, type SpdyStream } from '../../src/tunnel/spdy/session.js';
import { RstStatus } from '../../src/tunnel/spdy/framer.js';
import { goDialError, parsePortsQuery, writeRawResponse, writeRawStatus, type KubeletDeps, type PodRuntimeView } from './kubelet-portforward.js';
import type { ApiError } from './status.js';
import { ServerWire, SocketWire, WebSocketWire } from './spdy-wire.js';

export const TUNNEL_PREFIX = 'SPDY/3.1+';
export const PORT_FORWARD_PROTOCOL = 'portforward.k8s.io';
const FRAME_CHUNK = 32 * 1024; // io.Copy buffer: one DATA frame per 32 KiB read

export interface SpdyKubeletDeps extends KubeletDeps {
  streamCreationTimeoutMs(): number;
}

const text = 'text/plain; charset=utf-8';
const offered = (req: IncomingMessage): string[] => String(req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim()).filter(Boolean);

/** wsstream.IsWebSocketRequestWithTunnelingProtocol */
function isTunnelRequest(req: IncomingMessage): boolean {
  return String(req.headers.upgrade ?? '').toLowerCase() === 'websocket' && offered(req).some((p) => p.startsWith(TUNNEL_PREFIX) && p.endsWith('.k8s.io'));
}

function isSpdyUpgrade(req: IncomingMessage): boolean {
  return /spdy\/3\.1/i.test(String(req.headers.upgrade ?? ''));
}

interface Pair {
  requestId: string;
  data?: SpdyStream;
  error?: SpdyStream;
  timer?: NodeJS.Timeout;
  port: number;
  socket?: net.Socket;
  connected: boolean;
  pendingToPod: Buffer[];
  clientDone: boolean;
  podDone: boolean;
  readError?: NodeJS.ErrnoException;
  graceTimer?: NodeJS.Timeout;
  done: boolean;
}

class PodSession {
  readonly session: SpdySession;
  private readonly pairs = new Map<string, Pair>();
  private readonly active = new Set<Pair>();
  private readonly fullPods = new Set<net.Socket>();
  private readonly pausedPods = new Set<net.Socket>();

  constructor(readonly wire: ServerWire, readonly pod: PodRuntimeView, private readonly deps: SpdyKubeletDeps, head: Buffer | undefined, onGone: () => void) {
    this.session = new SpdySession('server', wire, {
      onStream: (s) => this.onStream(s),
      onGoAway: () => this.session.destroy(),
      onClose: () => {
        for (const p of [...this.pairs.values(), ...this.active]) this.dropPod(p);
        this.pairs.clear();
        this.active.clear();
        onGone();
      },
    });
    wire.onDrain = () => {
      for (const s of this.pausedPods) s.resume();
      this.pausedPods.clear();
    };
    wire.attach(this.session, head);
  }

  private onStream(s: SpdyStream): void {
    const portString = s.headers.port ?? '';
    const port = /^\d+$/.test(portString) ? Number(portString) : NaN;
    const type = s.headers.streamtype;
    if (!(port >= 1 && port <= 65535) || (type !== 'error' && type !== 'data')) return s.reset(RstStatus.CANCEL);
    s.reply();
    const requestId = s.headers.requestid || String(type === 'error' ? s.id : s.id - 2);
    let p = this.pairs.get(requestId);
    if (!p) {
      p = { requestId, port, connected: false, pendingToPod: [], clientDone: false, podDone: false, done: false };
      this.pairs.set(requestId, p);
      const pair = p;
      p.timer = setTimeout(() => {
        pair.error?.write(Buffer.from(`(conn=&{${this.connName()}}, request=${requestId}) timed out waiting for streams`));
        this.pairs.delete(requestId);
      }, this.deps.streamCreationTimeoutMs());
    }
    const pair = p;
    if (pair[type]) {
      pair.error?.write(Buffer.from(`error processing stream for request ${requestId}: ${type} stream already assigned`));
      return;
    }
    pair[type] = s;
    if (type === 'data') {
      s.onData = (chunk) => this.toPod(pair, chunk);
      s.onEnd = () => this.clientDirectionDone(pair);
    }
    s.onReset = () => this.finish(pair);
    if (pair.data && pair.error) {
      clearTimeout(pair.timer);
      this.pairs.delete(requestId);
      this.active.add(pair);
      pair.port = Number(pair.data.headers.port);
      this.dial(pair);
    }
  }

  private connName(): string {
    return `0xc000${Math.floor(Math.random() * 0xffffff).toString(16).padStart(6, '0')} [] {0 0} 0xc000${Math.floor(Math.random() * 0xffffff).toString(16).padStart(6, '0')}`;
  }

  private errorText(p: Pair, cause: string): string {
    return `error forwarding port ${p.port} to pod ${this.pod.sandboxId}, uid : failed to execute portforward in network namespace "${this.pod.netnsPath}": ${cause}`;
  }

  private dial(p: Pair): void {
    const target = this.deps.dialTarget(this.pod.namespace, this.pod.name, p.port);
    const failDial = (err: NodeJS.ErrnoException) => {
      const v4 = goDialError(err, 'tcp4', `127.0.0.1:${p.port}`);
      const v6 = goDialError(err, 'tcp6', `[::1]:${p.port}`);
      this.finish(p, this.errorText(p, `failed to connect to localhost:${p.port} inside namespace "${this.pod.sandboxId}", IPv4: ${v4} IPv6 ${v6} `));
    };
    if (target === 'refused') return void setImmediate(() => failDial({ code: 'ECONNREFUSED', message: 'connection refused' } as NodeJS.ErrnoException));
    const s = net.connect({ host: target.host, port: target.port, allowHalfOpen: true });
    p.socket = s;
    s.setNoDelay(true);
    s.on('connect', () => {
      p.connected = true;
      for (const chunk of p.pendingToPod.splice(0)) this.toPod(p, chunk);
      if (p.clientDone) this.clientDirectionDone(p, true);
    });
    s.on('data', (chunk: Buffer) => this.fromPod(p, chunk));
    s.on('end', () => this.podDirectionDone(p));
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (!p.connected) failDial(err);
      else p.readError ??= err;
    });
    s.on('close', () => {
      if (p.connected) this.podDirectionDone(p);
    });
    s.on('drain', () => {
      if (this.fullPods.delete(s) && this.fullPods.size === 0) this.wire.resume();
    });
  }

  private toPod(p: Pair, chunk: Buffer): void {
    if (p.done) return;
    if (!p.connected) return void p.pendingToPod.push(chunk);
    // Like spdystream's blocking data channel: a pod that does not read stalls the whole session.
    if (!p.socket!.write(chunk) && !this.fullPods.has(p.socket!)) {
      this.fullPods.add(p.socket!);
      this.wire.pause();
    }
  }

  private fromPod(p: Pair, chunk: Buffer): void {
    if (p.done) return;
    for (let off = 0; off < chunk.length; off += FRAME_CHUNK) p.data!.write(chunk.subarray(off, off + FRAME_CHUNK));
    if (this.wire.buffered > 1 << 20 && !p.socket!.isPaused()) {
      p.socket!.pause();
      this.pausedPods.add(p.socket!);
    }
  }

  /** io.Copy(pod, stream) returned: the client sent FIN. */
  private clientDirectionDone(p: Pair, connectedNow = false): void {
    if (p.clientDone && !connectedNow) return;
    p.clientDone = true;
    if (p.connected) this.oneDirectionDone(p);
  }

  /** io.Copy(stream, pod) returned: the pod closed or reset. */
  private podDirectionDone(p: Pair): void {
    if (p.podDone) return;
    p.podDone = true;
    this.oneDirectionDone(p);
  }

  private oneDirectionDone(p: Pair): void {
    if (p.done) return;
    const end = () => {
      const err = p.readError;
      let failure: string | undefined;
      if (err && err.code === 'ECONNRESET' && p.socket) {
        failure = this.errorText(p, `read tcp4 127.0.0.1:${p.socket.localPort ?? 0}->127.0.0.1:${p.port}: read: connection reset by peer`);
      }
      this.finish(p, failure);
    };
    if (p.clientDone && p.podDone) return end();
    if (p.graceTimer) return;
    const grace = this.deps.closeGraceMs();
    if (grace <= 0) end();
    else p.graceTimer = setTimeout(end, grace);
  }

  /** The pair is over: FIN both streams on success; error text then RST both on failure. */
  finish(p: Pair, failure?: string): void {
    if (p.done) return;
    p.done = true;
    this.active.delete(p);
    this.dropPod(p);
    if (failure) {
      p.error?.write(Buffer.from(failure));
      p.data?.reset(RstStatus.CANCEL);
      p.error?.reset(RstStatus.CANCEL);
    } else {
      p.data?.end();
      p.error?.end();
    }
  }

  private dropPod(p: Pair): void {
    clearTimeout(p.timer);
    clearTimeout(p.graceTimer);
    if (!p.socket) return;
    if (this.fullPods.delete(p.socket) && this.fullPods.size === 0) this.wire.resume();
    this.pausedPods.delete(p.socket);
    p.socket.destroy();
  }
}

export class KubeletSpdyPortForward {
  /** false: a server without the WebSocket tunnel (Kubernetes ≤ 1.29, or the feature gate off). */
  tunnel = true;
  // `ws` refuses "SPDY/3.1+…" as a subprotocol ("/" is not a token character), where gorilla/
  // websocket takes it: the header is taken off the request before the handshake and the chosen
  // protocol written into the 101 ourselves.
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
  private readonly sessions = new Set<PodSession>();

  constructor(private readonly deps: SpdyKubeletDeps) {
    this.wss.on('headers', (headers: string[], req: IncomingMessage & { spdyTunnelProtocol?: string }) => {
      if (req.spdyTunnelProtocol) headers.push(`Sec-WebSocket-Protocol: ${req.spdyTunnelProtocol}`);
    });
  }

  get openSessions(): number {
    return this.sessions.size;
  }

  /** Takes the upgrade if it is SPDY (plain, or tunnelled while `tunnel` is on); false otherwise. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, namespace: string, podName: string, query: URLSearchParams): boolean {
    const tunnelled = this.tunnel && isTunnelRequest(req);
    if (!tunnelled && !isSpdyUpgrade(req)) return false;
    socket.on('error', () => {});
    try {
      parsePortsQuery(query.getAll('ports'));
    } catch (e) {
      writeRawStatus(socket, e as ApiError);
      return true;
    }
    const pod = this.deps.lookupPod(namespace, podName);
    if (!pod) return writeRawStatus(socket, this.deps.notFound(podName)), true;
    if (!pod.running) return writeRawResponse(socket, 500, `pod not found (${JSON.stringify(`${pod.name}_${pod.namespace}`)})`, text), true;
    // The kubelet's httpstream.Handshake over X-Stream-Protocol-Version (the tunnel strips the prefix).
    const versions = tunnelled
      ? offered(req).filter((p) => p.startsWith(TUNNEL_PREFIX)).map((p) => p.slice(TUNNEL_PREFIX.length))
      : String(req.headers['x-stream-protocol-version'] ?? '').split(',').map((p) => p.trim()).filter(Boolean);
    if (versions.length === 0) return writeRawResponse(socket, 500, 'unable to upgrade: X-Stream-Protocol-Version is required', text), true;
    if (!versions.includes(PORT_FORWARD_PROTOCOL)) {
      return writeRawResponse(socket, 403, `unable to upgrade: unable to negotiate protocol: client supports [${versions.join(' ')}], server accepts [${PORT_FORWARD_PROTOCOL}]\n`, text), true;
    }
    if (tunnelled) {
      // gorilla's Upgrader picks the first offered protocol the server lists; here only one.
      const chosen = offered(req).find((p) => p === TUNNEL_PREFIX + PORT_FORWARD_PROTOCOL);
      delete req.headers['sec-websocket-protocol'];
      Object.assign(req, { spdyTunnelProtocol: chosen });
      this.wss.handleUpgrade(req, socket, head, (ws) => this.start(new WebSocketWire(ws), pod));
      return true;
    }
    if (!/upgrade/i.test(String(req.headers.connection ?? ''))) {
      return writeRawResponse(socket, 400, 'unable to upgrade: missing upgrade headers in request', text), true;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: ${PORT_FORWARD_PROTOCOL}\r\nDate: ${new Date().toUTCString()}\r\n\r\n`);
    this.start(new SocketWire(socket), pod, head);
    return true;
  }

  private start(wire: ServerWire, pod: PodRuntimeView, head?: Buffer): void {
    const capture = process.env.SIM_SPDY_CAPTURE;
    if (capture) wire.onBytes = (b) => appendFileSync(capture, `${b.toString('hex')}\n`);
    const s: PodSession = new PodSession(wire, pod, this.deps, head, () => this.sessions.delete(s));
    this.sessions.add(s);
  }

  /** Pod deleted: its sessions end at once. */
  closePod(namespace: string, name: string): void {
    for (const s of [...this.sessions]) if (s.pod.namespace === namespace && s.pod.name === name) s.session.destroy();
  }

  /** Extension: cut the connections of matching sessions without a goodbye (a broken tunnel). */
  killSessions(namespace?: string, name?: string): number {
    const hit = [...this.sessions].filter((s) => (namespace === undefined || s.pod.namespace === namespace) && (name === undefined || s.pod.name === name));
    for (const s of hit) s.wire.kill();
    return hit.length;
  }

  closeAll(): void {
    for (const s of [...this.sessions]) s.wire.kill();
    this.sessions.clear();
  }
}
