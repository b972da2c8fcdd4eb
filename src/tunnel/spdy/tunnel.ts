// One SPDY/3.1 session to a pod, tunnelled in a WebSocket: `GET …/pods/{pod}/portforward` (no
// query) with subprotocol "SPDY/3.1+portforward.k8s.io"; binary messages carry the raw SPDY byte
// stream, message boundaries mean nothing, close 1000 is EOF. Follows kubernetes client-go
// tools/portforward/{tunneling_dialer.go,tunneling_connection.go} (and the server half,
// staging/src/k8s.io/apiserver/pkg/util/proxy/streamtunnel.go). Anything but a 101 echoing exactly
// that subprotocol is a TunnelRefusal (the caller may fall back to per-stream WebSockets).
//
// The tunnel owns the byte pipe: frames written in one event-loop turn leave as one message; writers see
// `buffered` and wait for `whenDrained` above HIGH_WATER; readers that fall behind hold the whole
// tunnel (there is no SPDY flow control, see pf-stream.ts); PING keeps it alive and detects a dead
// path; GOAWAY then close 1000 ends it.
import { SpdySession, type SessionWire } from './session.js';
import { ReplyWatch } from './reply-watch.js';
import { startKeepalive, type KeepaliveOptions, type Pingable } from '../keepalive.js';
import { monotonicMs } from '../../core/clock.js';
import { UpstreamApiError } from '../../core/errors.js';
import { testHookMs } from '../../core/test-hooks.js';
import { statusMessage, type ApiRequestOptions } from '../../cluster/api.js';
import { redirectMessage } from '../../cluster/foreign-answer.js';
import { framesVisibleOnPath } from '../ws-options.js';
import { ByteWebSocket, type WebSocketEnd } from '../websocket/byte-socket.js';
import { UpgradeRefusal, upgradeToWebSocket } from '../websocket/handshake.js';

export const TUNNEL_PROTOCOL = 'SPDY/3.1+portforward.k8s.io';
export const HIGH_WATER = 1 << 20;
const MAX_BATCH = 64 * 1024;
const LOW_WATER = 256 * 1024;
/** Writers waiting this long for the tunnel to drain: the far end reads no more of it (a pod that does not read). */
const WRITES_STALLED_MS = 1000;
/**
 * How long a reader that is behind may hold the tunnel while other streams on it stall with it
 * (hold()): a client that does not catch up in this time (a paused download, a process stopped with
 * ^Z) is reset so that the others go on. Alone on its tunnel it holds nobody up and is left alone.
 */
const HOLD_MAX_MS = testHookMs('PROXYOUT_TEST_TUNNEL_HOLD_MS') ?? 10_000;

/** A stream whose reader is behind: reset if it holds others up too long. */
export interface TunnelHolder {
  destroy(err: Error): unknown;
}

/** The API server did not upgrade to the SPDY tunnel: `status` 101 means another subprotocol. */
export class TunnelRefusal extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly protocol?: string,
    /** A redirect's Location header. */
    readonly location?: string,
  ) {
    // The body of a refusal is a Status object (its message), or plain text (its first line); a
    // redirect is said by where it goes (upgradeRefusalDetail: never its query, nor its body).
    const detail = status >= 300 && status < 400 ? redirectMessage(status, location) : body ? statusMessage(body) : undefined;
    super(status === 101 ? `upgraded with subprotocol "${protocol ?? ''}" instead of ${TUNNEL_PROTOCOL}` : `HTTP ${status}${detail ? `: ${detail}` : ''}`);
    this.name = 'TunnelRefusal';
  }

  /**
   * Whether it says the server cannot tunnel at all (tunnel/negotiate.ts says which answers do):
   * another subprotocol, a 501, or a 4xx other than 401/403/404/408/429 that is not a Status object
   * — a Status is the API server's answer about this pod (`pod db-0 does not have a host assigned`).
   */
  get meansNoTunnel(): boolean {
    if (this.status >= 400 && this.status < 500 && isApiStatus(this.body)) return false;
    return this.status === 101 || (this.status >= 400 && this.status < 500 && !NOT_ABOUT_PROTOCOL.has(this.status)) || this.status === 501;
  }
}

const NOT_ABOUT_PROTOCOL = new Set([401, 403, 404, 408, 429]);

/** Whether a refusal's body is a metav1.Status, i.e. the API server's own answer rather than the kubelet's. */
function isApiStatus(body: string): boolean {
  if (!body.trimStart().startsWith('{')) return false;
  try {
    return (JSON.parse(body) as { kind?: unknown }).kind === 'Status';
  } catch {
    return false;
  }
}

/** Opens the WebSocket; rejects with TunnelRefusal or the network error. */
export async function dialTunnel(url: URL, conn: ApiRequestOptions, timeoutMs: number): Promise<ByteWebSocket> {
  let upgraded;
  try {
    upgraded = await upgradeToWebSocket(url, conn, TUNNEL_PROTOCOL, timeoutMs);
  } catch (err) {
    throw err instanceof UpgradeRefusal ? new TunnelRefusal(err.status, err.body, undefined, err.location) : err;
  }
  if (upgraded.protocol !== TUNNEL_PROTOCOL) {
    upgraded.socket.destroy();
    throw new TunnelRefusal(101, '', upgraded.protocol);
  }
  return new ByteWebSocket(upgraded.socket, upgraded.head, framesVisibleOnPath(url, conn) ? 'random' : 'zero', upgraded.reads);
}

export interface TunnelOptions {
  /** SPDY PINGs: they cross the API server and are answered by the kubelet, so they prove the whole path. */
  keepalive: KeepaliveOptions;
  /** Called before the tunnel is killed because pings went unanswered. */
  onUnanswered?(silentMs: number): void;
  /** namespace/name of the pod, for messages. */
  pod?: string;
  /** Called once when the tunnel is closed for good (error, peer close, close()). */
  onClosed(tunnel: PodTunnel, err?: Error): void;
  /** No SYN_REPLY for a while though streams wait for one (reply-watch.ts). */
  onSlowReplies?(tunnel: PodTunnel): void;
}

export class PodTunnel implements SessionWire {
  readonly session: SpdySession;
  closed = false;
  /** Streams note their SYN_STREAMs and SYN_REPLYs here (pf-stream.ts). */
  readonly replies: ReplyWatch;
  /** Closed because it answered no PING: streams the kubelet never answered may open elsewhere. */
  wentSilent = false;
  /** Closed because its pod was deleted: a stream the kubelet had not taken yet may go elsewhere. */
  podWentAway = false;
  /** The API server ended it (its kubelet went away), not we: a stream the pod had not ended was cut. */
  closedByServer = false;
  /** Bytes read from the tunnel so far: anything heard proves the path alive (reply-watch.ts). */
  bytesIn = 0;
  private nextRequestId = 0;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private scheduled = false;
  private drainWaiters: Array<() => void> = [];
  /** When the first of the drainWaiters began to wait. */
  private drainWaitSince = 0;
  /** Messages handed to the socket, and of them the last one written out (their callbacks run in order). */
  private messagesSent = 0;
  private messagesOut = 0;
  /** whenSent: the session's one callback, and the message it waits for. */
  private sentWaiter?: { message: number; cb: () => void };
  /** Readers behind, and since when each holds the tunnel. */
  private readonly holders = new Map<TunnelHolder, number>();
  /** Streams that wrote to their pod and have heard nothing from it since: they wait on the tunnel. */
  private readonly waiting = new Set<object>();
  private holdTimer?: NodeJS.Timeout;
  private stopKeepalive?: () => void;

  constructor(
    private readonly ws: ByteWebSocket,
    private readonly options: TunnelOptions,
  ) {
    this.session = new SpdySession('client', this, { onClose: (err) => this.onSessionClosed(err) });
    this.replies = new ReplyWatch(
      () => options.onSlowReplies?.(this),
      () => this.bytesIn,
    );
    // Pieces as the socket delivers them: the session's frame reader takes a byte stream.
    ws.onData = (piece) => {
      this.bytesIn += piece.length;
      this.session.receive(piece);
    };
    ws.onClose((end) => {
      // A kubelet that dies or restarts: the API server closes the WebSocket with 1000 all the same.
      if (!this.closed) this.closedByServer = true;
      this.session.destroy(end.error ? new Error(`the tunnel closed: ${end.error.message}`, { cause: end.error }) : undefined);
    });
    this.stopKeepalive = startKeepalive(this.pingable(), options.keepalive, (silentMs) => {
      options.onUnanswered?.(silentMs);
      this.kill(new Error(`the tunnel stopped answering pings: nothing within ${options.keepalive.timeoutMs} ms (${silentMs} ms)`));
    });
  }

  /**
   * A PING now: true when its answer comes back within `timeoutMs`, false when none does or the
   * tunnel closes. Only that answer counts, not any byte: after a pause, bytes the peer sent before
   * it still wait in the kernel and arrive first, from a peer that may be long gone.
   */
  checkNow(timeoutMs: number): Promise<boolean> {
    if (this.closed || !this.ws.isOpen) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      this.session.ping().then(
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        () => {
          clearTimeout(timer);
          resolve(false);
        },
      );
    });
  }

  /** A per-tunnel counter from 0, like kubectl's per-forwarder request ids. */
  requestId(): string {
    return String(this.nextRequestId++);
  }

  get buffered(): number {
    return this.pendingBytes + this.ws.bufferedAmount;
  }

  /** Calls back once the bytes queued towards the API server are below LOW_WATER. */
  whenDrained(cb: () => void): void {
    if (this.closed || this.buffered < LOW_WATER) return cb();
    if (this.drainWaiters.length === 0) this.drainWaitSince = monotonicMs();
    this.drainWaiters.push(cb);
  }

  /**
   * Writers have waited a while for the tunnel to drain: the kubelet reads no more of the session
   * (a pod that does not read stalls it), so a new stream here would wait behind them.
   */
  get writesStalled(): boolean {
    return this.drainWaiters.length > 0 && monotonicMs() - this.drainWaitSince >= WRITES_STALLED_MS;
  }

  /** Nothing of ours waits to be written (a kubelet that stopped reading would hold a PING back too). */
  get flowing(): boolean {
    return !this.ws.isPaused && this.buffered === 0;
  }

  /** A stream's reader is behind: nothing is read from the tunnel until it catches up. */
  get held(): boolean {
    return this.holders.size > 0;
  }

  /** A stream whose reader is behind holds the tunnel: nothing is read until every holder lets go. */
  hold(holder: TunnelHolder, on: boolean): void {
    if (on) {
      if (this.holders.size === 0) this.ws.pause();
      if (!this.holders.has(holder)) this.holders.set(holder, monotonicMs());
      this.holdTimer ??= setTimeout(() => this.checkHolders(), HOLD_MAX_MS).unref();
    } else if (this.holders.delete(holder) && this.holders.size === 0) {
      clearTimeout(this.holdTimer);
      this.holdTimer = undefined;
      this.ws.resume();
    }
  }

  /**
   * A stream wrote to its pod (`on`) or heard from it: one waiting for an answer behind a holder
   * past its time gets that holder reset now. Idle streams (a keep-alive connection between
   * requests) wait for nothing, and a paused download beside them is left to resume. Returns
   * whether the stream waits (`on`) or waited.
   */
  awaitAnswer(stream: object, on: boolean): boolean {
    if (!on) return this.waiting.delete(stream);
    this.waiting.add(stream);
    if (this.holders.size === 0 || this.holders.has(stream as TunnelHolder)) return true;
    const now = monotonicMs();
    if ([...this.holders.values()].some((since) => now - since >= HOLD_MAX_MS)) {
      clearTimeout(this.holdTimer);
      this.holdTimer = setTimeout(() => this.checkHolders(), 0).unref();
    }
    return true;
  }

  /**
   * The kubelet's SPDY has no flow control, so a reader behind can only stop the whole tunnel:
   * one that has held it HOLD_MAX_MS while another stream on it waits for its pod's answer is
   * reset, with a line saying so.
   */
  private checkHolders(): void {
    this.holdTimer = undefined;
    if (this.closed || this.holders.size === 0) return;
    const now = monotonicMs();
    let others = 0;
    for (const stream of this.waiting) if (!this.holders.has(stream as TunnelHolder)) others++;
    let next = HOLD_MAX_MS;
    for (const [holder, since] of [...this.holders]) {
      const held = now - since;
      if (held < HOLD_MAX_MS) next = Math.min(next, HOLD_MAX_MS - held);
      else if (others > 0) {
        const why = `its client fell over 1 MiB behind the pod and did not catch up in ${HOLD_MAX_MS / 1000} s, while ${others} other stream${others === 1 ? '' : 's'} on the tunnel to pod ${this.options.pod ?? '?'} waited behind it for the pod's answer (the kubelet's SPDY has no flow control): reset so that they go on`;
        holder.destroy(new UpstreamApiError(why));
      }
    }
    if (this.holders.size > 0) this.holdTimer = setTimeout(() => this.checkHolders(), next).unref();
  }

  write(bytes: Buffer): void {
    if (this.closed) return;
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    // Big batches go at once: the far end sees a message only when all of it has arrived.
    if (this.pendingBytes >= MAX_BATCH) return this.flush();
    if (this.scheduled) return;
    this.scheduled = true;
    // After this round of I/O callbacks: socket reads of several streams leave in one message.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** SessionWire.whenSent: `cb` once everything written so far is out of the process (one waiter at a time). */
  whenSent(cb: () => void): void {
    if (this.closed) return;
    const message = this.messagesSent + (this.pending.length > 0 ? 1 : 0);
    if (message <= this.messagesOut) return cb();
    this.sentWaiter = { message, cb };
  }

  /** SessionWire.close: the session ended; end the WebSocket (cleanly unless there was an error). */
  close(err?: Error): void {
    this.flush();
    if (err) this.ws.terminate();
    else this.ws.close();
  }

  /** GOAWAY, then close: streams still open end. */
  shutdown(): void {
    this.session.goAway();
    this.session.destroy();
  }

  /** GOAWAY, then close with `err`: streams still open fail with it (a client must not take a cut stream for a finished one). */
  abandon(err: Error): void {
    this.session.goAway();
    this.session.destroy(err);
  }

  /** Drop the connection at once (a dead path). */
  kill(err: Error): void {
    this.session.destroy(err);
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const pieces = this.pending;
    const total = this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    const message = ++this.messagesSent;
    // One frame, built in one buffer behind its header (frame-writer.ts).
    this.ws.send(pieces, total, () => {
      this.messagesOut = message;
      const waiter = this.sentWaiter;
      if (waiter && waiter.message <= message) {
        this.sentWaiter = undefined;
        waiter.cb();
      }
      if (this.drainWaiters.length > 0 && this.buffered < LOW_WATER) for (const cb of this.drainWaiters.splice(0)) cb();
    });
  }

  private pingable(): Pingable {
    const tunnel = this;
    return {
      get isOpen() {
        return !tunnel.closed && tunnel.ws.isOpen;
      },
      // A pod that does not read makes the kubelet stop reading the session: then our bytes queue
      // and its PING reply waits behind everything else.
      get isStalled() {
        return tunnel.ws.isPaused || tunnel.buffered > 0;
      },
      get sent() {
        return tunnel.session.dataBytes;
      },
      ping: () => void tunnel.session.ping().catch(() => undefined),
      listen(heard, closed) {
        tunnel.ws.onHeard = heard;
        const onEnd = (_end: WebSocketEnd): void => closed();
        tunnel.ws.onClose(onEnd);
        return () => {
          tunnel.ws.onHeard = () => undefined;
          tunnel.ws.offClose(onEnd);
        };
      },
    };
  }

  private onSessionClosed(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.holdTimer);
    this.waiting.clear();
    this.stopKeepalive?.();
    this.replies.stop();
    for (const cb of this.drainWaiters.splice(0)) cb();
    this.options.onClosed(this, err);
  }
}
