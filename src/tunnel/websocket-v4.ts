// Pod port-forward over WebSocket, subprotocol v4.channel.k8s.io, one WebSocket per TCP stream.
// Server side we talk to: kubelet staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/websocket.go
// and apimachinery pkg/util/httpstream/wsstream/conn.go: binary frames [channel][payload]; for
// port index 0, channel 0 carries data and channel 1 error text; the first message on each is the
// port as 2 bytes little-endian. The protocol has no half-close (see PortForwardStream._final).
import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import type { Logger } from '../core/log.js';
import { ConnectTimeoutError, HostUnreachableError, UpstreamApiError, errorMessage, type ProxyError } from '../core/errors.js';
import { abortable } from '../core/abort.js';
import { POD_FIRST_BYTE_GRACE_MS } from '../core/types.js';
import type { ApiConnection, ApiRequestOptions } from '../cluster/api.js';
import type { OpenOptions, PodPort, Transport } from './transport.js';
import { DEFAULT_KEEPALIVE, pingableWebSocket, startKeepalive, type KeepaliveOptions } from './keepalive.js';
import { PodStream, upgradeDropped, upgradeForbidden, upgradeRefusalDetail, where } from './pod-stream.js';
import { webSocketOptions } from './ws-options.js';
import { PongPacer } from './pong-pacer.js';
import { REFUSAL_BODY_MAX, UPGRADE_HEADERS_MISSING } from './websocket/handshake.js';

export const V4_PROTOCOL = 'v4.channel.k8s.io';
const DATA = 0;
const ERROR = 1;
/** An empty data message: the kubelet reads it as activity and skips it (showActivity). */
const EMPTY = Buffer.alloc(0);
/** Above this many bytes queued in the WebSocket, writers wait for the socket to drain. */
const WS_HIGH_WATER = 1 << 20;
/**
 * The largest message taken from the server. `ws` joins a message whole before handing it on (up
 * to 100 MiB by default, per stream); the kubelet sends one per read of the pod's connection
 * (Go's io.Copy: 32 KiB), so a bigger one is a broken or hostile server, not data to keep.
 */
export const V4_MESSAGE_MAX = 1 << 20;
/** After the client's FIN, close once the pod has been silent this long (mirrors the runtimes' ~1 s). */
const HALF_CLOSE_LINGER_MS = 1_000;

export class WebSocketV4Transport implements Transport {
  readonly name = 'websocket';
  private readonly live = new Set<WebSocket>();
  /** Streams up and not yet closed: checked after a pause. */
  private readonly streams = new Set<PortForwardStream>();

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    private readonly keepalive: KeepaliveOptions = DEFAULT_KEEPALIVE,
    /** A stream's WebSocket stopped answering pings: the path to the API server may be dead. */
    private readonly onDeadTunnel?: () => void,
  ) {}

  openTunnels(): number {
    return this.live.size;
  }

  /**
   * After a pause (core/pause-detector.ts) each stream's connection may be dead without a sign:
   * it must answer a ping within `checkMs` or fail now, not at its keepalive (up to 25 s).
   */
  afterPause(checkMs: number): void {
    for (const stream of this.streams) stream.checkNow(checkMs);
  }

  async close(): Promise<void> {
    for (const ws of this.live) ws.terminate();
    this.live.clear();
  }

  async open(target: PodPort, options: OpenOptions): Promise<Duplex> {
    // Credentials slow to come (a login under way, a hung plugin) end the open at the deadline, saying so.
    const conn = await abortable(this.api.requestOptions(), options.signal).catch((err: unknown) => {
      if (!options.signal.aborted) throw err;
      const waiting = this.api.credentialProblem;
      const why = waiting?.waiting ? `: ${waiting.message}` : '';
      throw new ConnectTimeoutError(`port-forward to ${where(target)} did not open in time${why}`, { cause: options.signal.reason });
    });
    let refused = false;
    try {
      return await this.openWith(conn, target, options, () => {
        refused = true;
        this.api.invalidate();
      });
    } catch (err) {
      const fresh = refused && !options.signal.aborted ? await this.api.renewedAfter401(conn) : undefined;
      if (!fresh) throw err;
      return this.openWith(fresh, target, options, () => this.api.invalidate());
    }
  }

  private async openWith(conn: ApiRequestOptions, target: PodPort, options: OpenOptions, onUnauthorized: () => void): Promise<Duplex> {
    const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward?ports=${target.port}`;
    const url = this.api.url(path, 'ws');
    // Pings are answered by PongPacer (one pong in flight, pong-pacer.ts), not ws's one per ping.
    const ws = new WebSocket(url, [V4_PROTOCOL], { ...webSocketOptions(url, conn), autoPong: false, maxPayload: V4_MESSAGE_MAX });
    answerPings(ws);
    this.live.add(ws);
    ws.once('close', () => this.live.delete(ws));
    const stream = new PortForwardStream(ws, target, this.log);
    const opened = await stream.open(options, onUnauthorized);
    this.api.accepted();
    stream.keepAlive(this.keepalive, this.onDeadTunnel);
    this.streams.add(stream);
    stream.once('close', () => this.streams.delete(stream));
    return opened;
  }
}

function answerPings(ws: WebSocket): void {
  const pongs = new PongPacer((payload, done) => {
    if (ws.readyState !== WebSocket.OPEN) return false;
    ws.pong(payload, true, () => done());
    return true;
  });
  ws.on('ping', (payload: Buffer) => pongs.ping(payload));
}

/** Maps a refused upgrade (the API server's HTTP status) to a reply. */
function upgradeError(target: PodPort, status: number, text: string, location?: string): ProxyError {
  const { detail, fromFront } = upgradeRefusalDetail(status, text, location);
  const dropped = upgradeDropped(target, status, detail);
  if (dropped) return dropped;
  const msg = `port-forward to ${where(target)} refused${fromFront ? '' : ' by the API server'} (${status}): ${detail}`;
  if (status === 403) return upgradeForbidden(msg, target, undefined, fromFront);
  if (status === 404 || status === 400) return new HostUnreachableError(msg, { retryable: true });
  return new UpstreamApiError(msg, { retryable: status >= 500 });
}

class PortForwardStream extends PodStream {
  private readonly prefixPending = [true, true];
  private lingerTimer?: NodeJS.Timeout;
  private clientEnded = false;
  /** We started the close (see the 'close' handler). */
  private closingByUs = false;
  /** Bytes of the client's sent so far (keepalive.ts). */
  private bytesSent = 0;

  constructor(
    private readonly ws: WebSocket,
    target: PodPort,
    log: Logger,
  ) {
    super(target, log, {});
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    // The pod side closed: end our readable side unless an error already destroyed us. Only a
    // normal close is an end (x/net/websocket, the kubelet's, closes with 1000; 1005 is a close
    // frame without a code); a connection that broke (1006: no close frame) or a server error
    // (1011…) cut the pod's bytes short, and the client must see that, not a clean FIN — unless
    // we closed it ourselves (the linger after the client's FIN, or a stream we abandoned).
    ws.on('close', (code: number) => {
      clearTimeout(this.lingerTimer);
      if (this.destroyed) return;
      if (this.closingByUs || code === 1000 || code === 1005) this.push(null);
      else this.destroy(new UpstreamApiError(`port-forward to ${where(target)} broke (WebSocket close code ${code})`));
    });
  }

  /** Resolves with this stream once the tunnel is up (and, with confirmMs, the dial not refused). */
  open(options: OpenOptions, onUnauthorized: () => void): Promise<Duplex> {
    const { ws, target } = this;
    return this.connected(
      options,
      (fail) => {
        ws.once('unexpected-response', (_req, res) => {
          if (res.statusCode === 101)
            return fail(new UpstreamApiError(`port-forward to ${where(target)} failed: ${UPGRADE_HEADERS_MISSING}`, { retryable: true }));
          if (res.statusCode === 401) onUnauthorized();
          // The start of the body is enough for the message; the rest is not waited for (it may never end).
          const chunks: Buffer[] = [];
          let kept = 0;
          const refused = () => fail(upgradeError(target, res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), res.headers.location));
          res.on('data', (c: Buffer) => {
            chunks.push(c.subarray(0, REFUSAL_BODY_MAX - kept));
            kept += Math.min(c.length, REFUSAL_BODY_MAX - kept);
            if (kept < REFUSAL_BODY_MAX) return;
            res.destroy();
            refused();
          });
          res.on('end', refused);
          res.on('error', () => fail(upgradeError(target, res.statusCode ?? 0, '')));
        });
        ws.on('error', (err: Error & { code?: string }) => {
          const why = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? `the server sent a message over ${V4_MESSAGE_MAX >> 20} MiB` : errorMessage(err);
          if (this.isOpening) fail(new UpstreamApiError(`port-forward to ${where(target)} failed: ${why}`, { cause: err, retryable: true }));
          else this.destroy(new UpstreamApiError(`port-forward to ${where(target)} broke: ${why}`, { cause: err }));
        });
        ws.once('open', () => {
          if (ws.protocol !== V4_PROTOCOL) fail(new UpstreamApiError(`API server answered port-forward with subprotocol "${ws.protocol}"`));
        });
        ws.once('close', (code: number) => {
          // The kubelet sends both channels' port prefixes as soon as it has the stream: a close
          // before them is a stream that was never set up (another endpoint may do), not a pod
          // that accepted and closed.
          if (this.prefixPending[DATA] || this.prefixPending[ERROR])
            fail(new UpstreamApiError(`port-forward to ${where(target)} closed before it was set up (WebSocket close code ${code})`, { retryable: true }));
          else this.podEndedEarly();
        });
      },
      () => ws.terminate(),
    );
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (!isBinary || data.length === 0 || this.destroyed) return;
    const channel = data[0];
    let payload = data.subarray(1);
    if (channel > ERROR) return;
    if (this.prefixPending[channel]) {
      if (payload.length < 2) return;
      this.prefixPending[channel] = false;
      payload = payload.subarray(2);
      if (!this.prefixPending[DATA] && !this.prefixPending[ERROR]) this.tunnelReady();
    }
    if (payload.length === 0) return;
    if (channel === ERROR) return this.errorFromKubelet(payload.toString('utf8'));
    this.podSending();
    if (!this.push(payload)) this.ws.pause();
    if (this.clientEnded) this.armLinger();
  }

  override _read(): void {
    if (!this.ws.isPaused) return;
    this.ws.resume();
    if (this.clientEnded) this.armLinger();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.ws.readyState !== WebSocket.OPEN) {
      callback(new UpstreamApiError(`port-forward to ${where(this.target)} is closed`));
      return;
    }
    this.bytesSent += chunk.length;
    const frame = Buffer.allocUnsafe(chunk.length + 1);
    frame[0] = DATA;
    chunk.copy(frame, 1);
    if (this.ws.bufferedAmount < WS_HIGH_WATER) {
      this.ws.send(frame, { binary: true });
      callback();
    } else {
      this.ws.send(frame, { binary: true }, (err) => callback(err ?? null));
    }
  }

  /**
   * v4 cannot tell the pod "no more data from me". Closing at once would cut the reply of a
   * request-then-FIN client, keeping the tunnel forever would hang one that waits for EOF: we keep
   * it while the pod still sends and close once it has been quiet for a moment.
   */
  override _final(callback: (err?: Error | null) => void): void {
    this.clientEnded = true;
    this.armLinger(this.podHasSpoken ? HALF_CLOSE_LINGER_MS : POD_FIRST_BYTE_GRACE_MS);
    callback();
  }

  /** Pings the tunnel while it is open; a peer that stopped answering fails the stream. */
  keepAlive(options: KeepaliveOptions, onDead?: () => void): void {
    const stop = startKeepalive(
      pingableWebSocket(
        this.ws,
        () => this.bytesSent,
        () => this.showActivity(),
      ),
      options,
      (silentMs) => {
        this.log.warn({ target: where(this.target), silentMs }, 'port-forward tunnel stopped answering pings; closing it');
        onDead?.();
        this.destroy(new UpstreamApiError(`port-forward to ${where(this.target)} stopped answering: no pong within ${options.timeoutMs} ms`));
      },
    );
    this.once('close', stop);
  }

  /**
   * The kubelet's v4 handler (wsstream) closes a stream that carried no data message for its
   * --streaming-connection-idle-timeout (4 h by default, minutes on hardened nodes); pings do not
   * count. An empty message does, and it skips it: one goes with each keepalive ping.
   */
  private showActivity(): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(EMPTY, { binary: true });
  }

  /**
   * The peer must answer a ping within `ms`, or the stream fails. A stalled one (we do not read,
   * or our bytes still queue) could not see the answer: no verdict, its keepalive judges it.
   */
  checkNow(ms: number): void {
    const tunnel = pingableWebSocket(this.ws);
    if (!tunnel.isOpen || tunnel.isStalled) return;
    const timer = setTimeout(() => {
      unlisten();
      this.log.warn({ target: where(this.target), checkMs: ms }, 'port-forward tunnel stopped answering pings; closing it');
      this.destroy(new UpstreamApiError(`port-forward to ${where(this.target)} gave no answer to a ping after the process was paused`));
    }, ms);
    timer.unref();
    const settled = (): void => {
      clearTimeout(timer);
      unlisten();
    };
    const unlisten = tunnel.listen(settled, settled);
    tunnel.ping();
  }

  private armLinger(ms = HALF_CLOSE_LINGER_MS): void {
    clearTimeout(this.lingerTimer);
    // Held back for a slow reader, the pod's silence is ours, not its end: _read arms it again.
    if (this.ws.isPaused) return;
    this.lingerTimer = setTimeout(() => {
      this.closingByUs = true;
      this.ws.close(1000);
    }, ms);
    this.lingerTimer.unref();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    clearTimeout(this.lingerTimer);
    this.closingByUs = true;
    // A close handshake needs the server's close frame, which queues behind pod data we have
    // not read; when we abandon that data (a client cancelled a download) it would stall for
    // ws's 30 s close timeout with the tunnel and the pod's connection still open. Cut instead.
    if (this.ws.readyState === WebSocket.OPEN && !err && this.readableEnded) this.ws.close(1000);
    else if (this.ws.readyState !== WebSocket.CLOSED) this.ws.terminate();
    callback(err);
  }
}
