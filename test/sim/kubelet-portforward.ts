// WebSocket pod port-forward, as the API server + kubelet + container runtime serve it.
// Follows:
//  - staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/websocket.go (NewV4Options, channel
//    layout data=2i / error=2i+1, 2-byte little-endian port prefix on both, error text format)
//  - staging/src/k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go (subprotocol choice in the
//    client's order among "", v4.channel.k8s.io, v4.base64.channel.k8s.io; binary vs base64 framing;
//    unknown channels and writes to write-only channels ignored; 32 MiB max message of
//    golang.org/x/net/websocket)
//  - staging/src/k8s.io/kubelet/pkg/cri/streaming/server.go (the runtime's stream server passes the
//    pod *sandbox id* as the pod name and an empty uid into the error text)
//  - pkg/registry/core/pod/strategy.go PortForwardLocation + staging/src/k8s.io/apimachinery/pkg/
//    runtime/conversion.go Convert_Slice_string_To_Slice_int32 (apiserver-side `ports` parsing)
//  - containerd internal/cri/server/sandbox_portforward_linux.go (dial localhost:port in the pod
//    netns; after one direction ends wait at most 1 s for the other, then close; dial error text)
import net from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import { WebSocketServer, type WebSocket, type RawData } from 'ws';
import type { DialTarget } from './backends.js';
import type { ApiError } from './status.js';
import { badRequest } from './status.js';

export const V4_BINARY = 'v4.channel.k8s.io';
export const V4_BASE64 = 'v4.base64.channel.k8s.io';
const SUPPORTED = ['', V4_BINARY, V4_BASE64];
const MAX_MESSAGE = 32 << 20; // golang.org/x/net/websocket DefaultMaxPayloadBytes
const FRAME_CHUNK = 32 * 1024; // io.Copy buffer size: one WebSocket message per 32 KiB read
const HIGH_WATER = 1 << 20;
const LOW_WATER = 256 * 1024;

export interface PodRuntimeView {
  namespace: string;
  name: string;
  uid: string;
  sandboxId: string;
  netnsPath: string;
  /** false when the pod has no running sandbox (Pending, stopped while terminating). */
  running: boolean;
  /** false while no node has taken the pod (no spec.nodeName): the API server refuses 400. */
  scheduled: boolean;
}

export interface KubeletDeps {
  lookupPod(namespace: string, name: string): PodRuntimeView | undefined;
  /** 'refused' = nothing listens (or refusePort): the dial fails with ECONNREFUSED. */
  dialTarget(namespace: string, name: string, port: number): DialTarget | 'refused';
  closeGraceMs(): number;
  notFound(name: string): ApiError;
  /** Whether the runtime still has this sandbox (a session can outlive its pod). */
  sandboxAlive(sandboxId: string): boolean;
  /** How the error channel/stream carries a failure: plain text, or newer kubelets' JSON. */
  errorFormat(): KubeletErrorFormat;
}

/**
 * Plain text (every kubelet up to the 1.36 line), or the JSON object `{closeConnection, message}`
 * newer kubelets write on the port-forward error stream.
 */
export type KubeletErrorFormat = 'text' | 'json';

export function encodeKubeletError(format: KubeletErrorFormat, message: string): Buffer {
  return Buffer.from(format === 'json' ? JSON.stringify({ closeConnection: true, message }) : message);
}

/** containerd's answer when the session's sandbox is gone (pod deleted under a live session). */
export function sandboxGone(sandboxId: string): string {
  return `failed to find sandbox "${sandboxId}" in store: not found`;
}

export function writeRawResponse(socket: Duplex, code: number, body: string, contentType?: string): void {
  let head = `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? ''}\r\n`;
  if (contentType !== undefined) head += `Content-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  head += 'Connection: close\r\n\r\n';
  socket.once('error', () => {});
  socket.end(head + body, () => socket.destroy());
}

/** The kubelet's refusals: plain text, ended by a newline as Go's http.Error writes it. */
export function writeKubeletText(socket: Duplex, code: number, message: string): void {
  writeRawResponse(socket, code, `${message}\n`, 'text/plain; charset=utf-8');
}

/** The API server's refusal of a pod it cannot forward to: it has no node (pkg/registry/core/pod/strategy.go PortForwardLocation). */
export function notScheduled(name: string): ApiError {
  return badRequest(`pod ${name} does not have a host assigned`);
}

export function writeRawStatus(socket: Duplex, err: ApiError): void {
  writeRawResponse(socket, err.code, JSON.stringify(err.body()), 'application/json');
}

/** Apiserver side: `ports` values (repeatable, comma lists) → numbers, or a 400 Status. */
export function parsePortsQuery(values: string[]): number[] {
  const out: number[] = [];
  for (const s of values) {
    for (const v of s.split(',')) {
      if (!/^\d+$/.test(v)) throw badRequest(`cannot convert to []int32: strconv.ParseUint: parsing ${JSON.stringify(v)}: invalid syntax`);
      const n = Number(v);
      if (n > 65535) throw badRequest(`cannot convert to []int32: strconv.ParseUint: parsing ${JSON.stringify(v)}: value out of range`);
      out.push(n);
    }
  }
  return out;
}

function isWebSocketRequest(req: IncomingMessage): boolean {
  const upgrade = String(req.headers.upgrade ?? '').toLowerCase();
  const connection = String(req.headers.connection ?? '').toLowerCase();
  return upgrade === 'websocket' && /(^|.*,\s*)upgrade($|\s*,)/.test(connection);
}

/** wsstream handshake: first protocol in the client's order that the server supports. */
export function chooseSubprotocol(header: string | undefined): string | undefined {
  const offered = header ? header.split(',').map((p) => p.trim()) : [];
  const candidates = offered.length ? offered : [''];
  return candidates.find((p) => SUPPORTED.includes(p));
}

export function goDialError(err: NodeJS.ErrnoException, family: 'tcp4' | 'tcp6', addr: string): string {
  const text =
    err.code === 'ECONNREFUSED'
      ? 'connect: connection refused'
      : err.code === 'ETIMEDOUT'
        ? 'i/o timeout'
        : err.code === 'EADDRNOTAVAIL'
          ? 'connect: cannot assign requested address'
          : err.message;
  return `dial ${family} ${addr}: ${text}`;
}

interface Pair {
  index: number;
  port: number;
  socket?: net.Socket;
  connected: boolean;
  done: boolean;
  graceTimer?: NodeJS.Timeout;
  /** What the grace timer runs (endLingering runs it early). */
  graceEnd?: () => void;
  readError?: NodeJS.ErrnoException;
}

class Session {
  readonly pairs: Pair[];
  private readonly base64: boolean;
  private readonly pausedBackends = new Set<net.Socket>();
  private readonly fullBackends = new Set<Pair>();
  private closed = false;

  constructor(
    private readonly ws: WebSocket,
    readonly pod: PodRuntimeView,
    ports: number[],
    protocol: string,
    private readonly deps: KubeletDeps,
    private readonly onGone: (s: Session) => void,
  ) {
    this.base64 = protocol === V4_BASE64;
    this.pairs = ports.map((port, index) => ({ index, port, connected: false, done: false }));
    ws.on('message', (data: RawData) => this.fromClient(data as Buffer));
    ws.on('close', () => this.clientGone());
    ws.on('error', () => {});
    for (const p of this.pairs) {
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16LE(p.port, 0);
      this.send(2 * p.index, prefix);
      this.send(2 * p.index + 1, prefix);
    }
    for (const p of this.pairs) this.dial(p);
  }

  private send(channel: number, payload: Buffer, cb?: (err?: Error) => void): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    if (this.base64) {
      this.ws.send(String.fromCharCode(48 + channel) + payload.toString('base64'), { binary: false }, cb);
    } else {
      const frame = Buffer.allocUnsafe(payload.length + 1);
      frame[0] = channel;
      payload.copy(frame, 1);
      this.ws.send(frame, { binary: true }, cb);
    }
  }

  private errorText(p: Pair, cause: string): string {
    return `error forwarding port ${p.port} to pod ${this.pod.sandboxId}, uid : failed to execute portforward in network namespace "${this.pod.netnsPath}": ${cause}`;
  }

  private dial(p: Pair): void {
    if (!this.deps.sandboxAlive(this.pod.sandboxId)) {
      const text = `error forwarding port ${p.port} to pod ${this.pod.sandboxId}, uid : ${sandboxGone(this.pod.sandboxId)}`;
      setImmediate(() => this.finish(p, text));
      return;
    }
    const target = this.deps.dialTarget(this.pod.namespace, this.pod.name, p.port);
    if (target === 'refused') {
      // At once, as the streaming server does: the refusal leaves in the same burst of frames as the
      // port prefixes, and a client reads set-up and failure in one go (docs/simulated-cluster.md).
      const refused = { code: 'ECONNREFUSED', message: 'connection refused' } as NodeJS.ErrnoException;
      this.finish(p, this.dialFailure(p, refused));
      return;
    }
    const s = net.connect({ host: target.host, port: target.port, allowHalfOpen: true });
    p.socket = s;
    s.setNoDelay(true);
    s.on('connect', () => {
      p.connected = true;
    });
    s.on('data', (chunk: Buffer) => this.fromBackend(p, chunk));
    s.on('end', () => this.backendDirectionDone(p));
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (!p.connected) this.finish(p, this.dialFailure(p, err));
      else p.readError ??= err;
    });
    s.on('close', () => {
      if (p.connected) this.backendDirectionDone(p);
    });
    s.on('drain', () => {
      if (this.fullBackends.delete(p) && this.fullBackends.size === 0) this.ws.resume();
    });
  }

  private dialFailure(p: Pair, err: NodeJS.ErrnoException): string {
    const v4 = goDialError(err, 'tcp4', `127.0.0.1:${p.port}`);
    const v6 = goDialError(err, 'tcp6', `[::1]:${p.port}`);
    return this.errorText(p, `failed to connect to localhost:${p.port} inside namespace "${this.pod.sandboxId}", IPv4: ${v4} IPv6 ${v6} `);
  }

  private fromBackend(p: Pair, chunk: Buffer): void {
    if (p.done) return;
    for (let off = 0; off < chunk.length; off += FRAME_CHUNK) {
      this.send(2 * p.index, chunk.subarray(off, off + FRAME_CHUNK), () => this.maybeResumeBackends());
    }
    if (this.ws.bufferedAmount > HIGH_WATER && p.socket && !p.socket.isPaused()) {
      p.socket.pause();
      this.pausedBackends.add(p.socket);
    }
  }

  private maybeResumeBackends(): void {
    if (this.pausedBackends.size === 0 || this.ws.bufferedAmount > LOW_WATER) return;
    for (const s of this.pausedBackends) s.resume();
    this.pausedBackends.clear();
  }

  /** Backend → client copy ended (FIN or reset): wait ≤ grace for the other direction, then close. */
  private backendDirectionDone(p: Pair): void {
    if (p.done || p.graceTimer) return;
    const grace = this.deps.closeGraceMs();
    const end = (): void => {
      const err = p.readError;
      let text: string | undefined;
      if (err && err.code === 'ECONNRESET' && p.socket) {
        const s = p.socket;
        text = this.errorText(p, `read tcp4 127.0.0.1:${s.localPort ?? 0}->127.0.0.1:${p.port}: read: connection reset by peer`);
      }
      this.finish(p, text);
    };
    if (grace <= 0) end();
    else {
      p.graceEnd = end;
      // unref: a grace still running when a test file is done (a pair of a session already gone)
      // must not hold its process; the sockets it waits for keep the loop alive while they last.
      p.graceTimer = setTimeout(end, grace).unref();
    }
  }

  /** Extension: pairs waiting out the close grace (one direction done) end now; returns how many. */
  endLingering(): number {
    const lingering = this.pairs.filter((p) => p.graceTimer && !p.done);
    for (const p of lingering) {
      clearTimeout(p.graceTimer);
      p.graceEnd?.();
    }
    return lingering.length;
  }

  private fromClient(data: Buffer): void {
    if (data.length === 0) return;
    let channel = data[0]!;
    let payload = data.subarray(1);
    if (this.base64) {
      channel -= 48;
      payload = Buffer.from(payload.toString('latin1'), 'base64');
    }
    if (channel < 0 || channel >= this.pairs.length * 2 || channel % 2 === 1) return;
    const p = this.pairs[channel / 2]!;
    if (p.done || !p.socket || p.socket.destroyed || payload.length === 0) return;
    if (!p.socket.write(payload) && !this.fullBackends.has(p)) {
      this.fullBackends.add(p);
      this.ws.pause();
    }
  }

  /** A port's forward is over: optional error text, close the pod connection, maybe the WebSocket. */
  finish(p: Pair, errorText?: string): void {
    if (p.done) return;
    p.done = true;
    if (p.graceTimer) clearTimeout(p.graceTimer);
    if (errorText) this.send(2 * p.index + 1, encodeKubeletError(this.deps.errorFormat(), errorText));
    p.socket?.destroy();
    if (this.fullBackends.delete(p) && this.fullBackends.size === 0) this.ws.resume();
    if (this.pairs.every((x) => x.done)) this.ws.close(1000);
  }

  /** Tear down at once (pod deleted, simulator stopping). */
  abort(): void {
    for (const p of this.pairs) this.finish(p);
    this.ws.close(1000);
  }

  private clientGone(): void {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pairs) {
      if (p.graceTimer) clearTimeout(p.graceTimer);
      p.done = true;
      p.socket?.destroy();
    }
    this.onGone(this);
  }

  terminate(): void {
    this.ws.terminate();
  }
}

export class KubeletPortForward {
  private readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: MAX_MESSAGE,
    clientTracking: false,
    handleProtocols: (protocols) => chooseSubprotocol([...protocols].join(',')) ?? false,
  });
  private readonly sessions = new Set<Session>();

  constructor(private readonly deps: KubeletDeps) {
    // x/net/websocket echoes the chosen protocol even when it is "" (no header from the client):
    // the 101 then carries an empty "Sec-WebSocket-Protocol:" header.
    this.wss.on('headers', (headers: string[], req: IncomingMessage) => {
      if (req.headers['sec-websocket-protocol'] === undefined) headers.push('Sec-WebSocket-Protocol: ');
    });
  }

  get openSessions(): number {
    return this.sessions.size;
  }

  /** Called by the API server for an authenticated, authorized portforward upgrade request. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, namespace: string, podName: string, query: URLSearchParams): void {
    socket.on('error', () => {});
    // API server: parse PodPortForwardOptions, look the pod up, then proxy to the kubelet.
    let ports: number[];
    try {
      ports = parsePortsQuery(query.getAll('ports'));
    } catch (e) {
      return writeRawStatus(socket, e as ApiError);
    }
    const pod = this.deps.lookupPod(namespace, podName);
    if (!pod) return writeRawStatus(socket, this.deps.notFound(podName));
    if (!pod.scheduled) return writeRawStatus(socket, notScheduled(podName));
    // Kubelet (go-restful WriteError: plain text bodies).
    if (!isWebSocketRequest(req)) {
      return writeRawResponse(
        socket,
        400,
        'the simulated kubelet implements only the WebSocket (v4) port-forward protocol, not SPDY',
        'text/plain; charset=utf-8',
      );
    }
    if (ports.length === 0) return writeKubeletText(socket, 400, 'query parameter "port" is required');
    const portString = ports.join(',');
    if (ports.some((p) => p < 1)) return writeKubeletText(socket, 400, `port ${JSON.stringify(portString)} must be > 0`);
    if (!pod.running) {
      return writeKubeletText(socket, 500, `pod not found (${JSON.stringify(`${pod.name}_${pod.namespace}`)})`);
    }
    const protocol = chooseSubprotocol(req.headers['sec-websocket-protocol']);
    if (protocol === undefined) return writeRawResponse(socket, 403, '');
    // ws answers 400 to an offer with a name that is not an RFC 7230 token ("SPDY/3.1+portforward.k8s.io"
    // beside v4 to an older kubelet); upstream passes over what it does not serve. ws sees only the choice.
    if (protocol) req.headers['sec-websocket-protocol'] = protocol;
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const s = new Session(ws, pod, ports, protocol, this.deps, (gone) => this.sessions.delete(gone));
      this.sessions.add(s);
    });
  }

  closePod(namespace: string, name: string): void {
    for (const s of [...this.sessions]) if (s.pod.namespace === namespace && s.pod.name === name) s.abort();
  }

  /** Extension: every session's pairs waiting out the close grace end now; returns how many. */
  endLingering(): number {
    let n = 0;
    for (const s of this.sessions) n += s.endLingering();
    return n;
  }

  closeAll(): void {
    for (const s of [...this.sessions]) s.terminate();
    this.sessions.clear();
  }
}
