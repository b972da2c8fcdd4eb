// One SPDY port-forward session of the simulated kubelet (kubelet-spdy.ts does the handshakes).
// Follows staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/httpstream.go: streams need
// `port` (1–65535) and `streamtype` error|data, else RST; SYN_REPLY with empty headers at once;
// pairs by `requestid` (old clients: derived from the stream id); dials only when both arrived; an
// unpaired request gets "timed out waiting for streams" after the stream creation timeout (30 s).
// The runtime (containerd internal/cri/server/sandbox_portforward_linux.go) copies both ways; once
// one direction ends it waits at most closeGraceMs for the other, then closes: FIN on both streams.
// A failed dial or a reset pod connection, in the frame order deps.failureFrames() picks (see
// SpdyFailureFrames); a session whose sandbox is gone (pod deleted under it) answers every new
// pair with containerd's "failed to find sandbox … in store: not found".
// Backpressure as spdystream's blocking data channel: a pod that does not read stalls the session.
// Going away as spdystream's Connection.Close (connection.go; the kubelet's idle timeout, a
// streaming server shutting down): GOAWAY naming the last stream taken, later SYN_STREAMs dropped
// without a word (session.ts), open streams carry on, the connection closes once none is left.
import net from 'node:net';
import { SpdySession, type SpdyStream } from '../../src/tunnel/spdy/session.js';
import { RstStatus } from '../../src/tunnel/spdy/framer.js';
import { encodeKubeletError, goDialError, sandboxGone, type PodRuntimeView } from './kubelet-portforward.js';
import type { SpdyKubeletDeps } from './kubelet-spdy.js';
import { SynStreamFinder, type ServerWire } from './spdy-wire.js';

const FRAME_CHUNK = 32 * 1024; // io.Copy buffer: one DATA frame per 32 KiB read

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
  /** What the grace timer runs (endLingering runs it early). */
  graceEnd?: () => void;
  done: boolean;
}

export class PodSession {
  readonly session: SpdySession;
  private readonly pairs = new Map<string, Pair>();
  private readonly active = new Set<Pair>();
  private readonly fullPods = new Set<net.Socket>();
  private readonly pausedPods = new Set<net.Socket>();
  private readonly synStreams = new SynStreamFinder();
  /** Go away just before the next SYN_STREAM is read: it crossed our GOAWAY on the wire. */
  private goAwayAtNextStream = false;
  private goingAway = false;

  constructor(
    readonly wire: ServerWire,
    readonly pod: PodRuntimeView,
    private readonly deps: SpdyKubeletDeps,
    head: Buffer | undefined,
    onGone: () => void,
    onGoAway: () => void,
  ) {
    this.session = new SpdySession('server', wire, {
      onStream: (s) => this.onStream(s),
      onGoAway: () => {
        onGoAway();
        this.session.destroy();
      },
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
    wire.attach(this.session, head, (bytes) => this.receive(bytes));
  }

  /** Sends GOAWAY now, or (`atNextStream`) right before the next SYN_STREAM arrives, which is then dropped. */
  goAway(atNextStream = false): void {
    if (atNextStream) {
      this.goAwayAtNextStream = true;
      return;
    }
    this.session.goAway();
    this.goingAway = true;
    this.closeIfDone();
  }

  private receive(bytes: Buffer): void {
    const at = this.synStreams.find(bytes);
    if (this.goAwayAtNextStream && at >= 0) {
      this.goAwayAtNextStream = false;
      this.session.receive(bytes.subarray(0, at));
      this.goAway();
      bytes = bytes.subarray(at);
    }
    this.session.receive(bytes);
    this.closeIfDone();
  }

  /** spdystream's shutdown after GOAWAY: the connection closes when no stream is left. */
  private closeIfDone(): void {
    if (this.goingAway && this.session.activeStreams === 0) this.session.destroy();
  }

  private onStream(s: SpdyStream): void {
    const portString = s.headers.port ?? '';
    const port = /^\d+$/.test(portString) ? Number(portString) : NaN;
    const type = s.headers.streamtype;
    if (!(port >= 1 && port <= 65535) || (type !== 'error' && type !== 'data')) return s.reset(RstStatus.CANCEL);
    s.reply(this.deps.replyHeaders());
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
    return `0xc000${Math.floor(Math.random() * 0xffffff)
      .toString(16)
      .padStart(6, '0')} [] {0 0} 0xc000${Math.floor(Math.random() * 0xffffff)
      .toString(16)
      .padStart(6, '0')}`;
  }

  private errorText(p: Pair, cause: string): string {
    return `error forwarding port ${p.port} to pod ${this.pod.sandboxId}, uid : failed to execute portforward in network namespace "${this.pod.netnsPath}": ${cause}`;
  }

  private dial(p: Pair): void {
    if (!this.deps.sandboxAlive(this.pod.sandboxId)) {
      return void setImmediate(() => this.finish(p, `error forwarding port ${p.port} to pod ${this.pod.sandboxId}, uid : ${sandboxGone(this.pod.sandboxId)}`));
    }
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
    else {
      p.graceEnd = end;
      // unref: a grace still running when a test file is done (a pair of a session already gone)
      // must not hold its process; the sockets it waits for keep the loop alive while they last.
      p.graceTimer = setTimeout(end, grace).unref();
    }
  }

  /** Extension: pairs waiting out the close grace (one direction done) end now; returns how many. */
  endLingering(): number {
    const lingering = [...this.active, ...this.pairs.values()].filter((p) => p.graceTimer && !p.done);
    for (const p of lingering) {
      clearTimeout(p.graceTimer);
      p.graceEnd?.();
    }
    return lingering.length;
  }

  /** The pair is over: FIN both streams on success; on failure the frames deps.failureFrames() picks. */
  finish(p: Pair, failure?: string): void {
    if (p.done) return;
    p.done = true;
    this.active.delete(p);
    this.dropPod(p);
    if (!failure) {
      p.data?.end();
      p.error?.end();
      this.closeIfDone();
      return;
    }
    const text = encodeKubeletError(this.deps.errorFormat(), failure);
    switch (this.deps.failureFrames()) {
      case 'containerd':
        // The runtime closes the data stream it was handed, the kubelet writes the error, and the
        // error stream is reset as the pair is torn down.
        p.data?.end();
        p.error?.write(text);
        p.error?.reset(RstStatus.CANCEL);
        break;
      case 'text-first':
        p.error?.write(text);
        p.data?.end();
        p.error?.end();
        break;
      case 'text-then-rst':
        p.error?.write(text);
        p.data?.reset(RstStatus.CANCEL);
        p.error?.reset(RstStatus.CANCEL);
        break;
      case 'rst-only':
        p.data?.reset(RstStatus.CANCEL);
        p.error?.reset(RstStatus.CANCEL);
        break;
      case 'goaway':
        // The kubelet gives up on the whole connection while the pair is open.
        this.session.goAway();
        this.session.destroy();
        break;
    }
  }

  /** Stream pairs open or waiting for their partner (for tests: back to 0 once streams are done). */
  get pairCount(): number {
    return this.active.size + this.pairs.size;
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
