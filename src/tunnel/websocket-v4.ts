// Pod port-forward over WebSocket, subprotocol v4.channel.k8s.io, one WebSocket per TCP stream.
// Server side we talk to: kubelet staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/websocket.go
// and apimachinery pkg/util/httpstream/wsstream/conn.go: binary frames [channel][payload]; for
// port index 0, channel 0 carries data and channel 1 error text; the first message on each is the
// port as 2 bytes little-endian. The protocol has no half-close (see PortForwardStream._final).
import { Duplex } from 'node:stream';
import WebSocket from 'ws';
import type { Logger } from '../core/log.js';
import {
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostUnreachableError,
  NotAllowedError,
  UpstreamApiError,
  type ProxyError,
} from '../core/errors.js';
import { statusMessage, type ApiConnection } from '../cluster/api.js';
import type { OpenOptions, PodPort, Transport } from './transport.js';
import { startKeepalive, type KeepaliveOptions } from './keepalive.js';

export const V4_PROTOCOL = 'v4.channel.k8s.io';
const DATA = 0;
const ERROR = 1;
/** Above this many bytes queued in the WebSocket, writers wait for the socket to drain. */
const WS_HIGH_WATER = 1 << 20;
/** After the client's FIN, close once the pod has been silent this long (mirrors the runtimes' ~1 s). */
const HALF_CLOSE_LINGER_MS = 1_000;
/** Keepalive when the owner gives none (tests, tools); the proxy passes --keepalive values. */
export const DEFAULT_KEEPALIVE: KeepaliveOptions = { intervalMs: 30_000, timeoutMs: 15_000 };

export class WebSocketV4Transport implements Transport {
  readonly name = 'websocket';
  private readonly live = new Set<WebSocket>();

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    private readonly keepalive: KeepaliveOptions = DEFAULT_KEEPALIVE,
  ) {}

  openTunnels(): number {
    return this.live.size;
  }

  async close(): Promise<void> {
    for (const ws of this.live) ws.terminate();
    this.live.clear();
  }

  async open(target: PodPort, options: OpenOptions): Promise<Duplex> {
    const conn = await this.api.requestOptions();
    const path = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/portforward?ports=${target.port}`;
    const ws = new WebSocket(this.api.url(path, 'ws'), [V4_PROTOCOL], {
      ...conn,
      perMessageDeflate: false,
      followRedirects: false,
    });
    this.live.add(ws);
    ws.once('close', () => this.live.delete(ws));
    const stream = new PortForwardStream(ws, target, this.log);
    const opened = await stream.connected(options, () => this.api.invalidate());
    stream.keepAlive(this.keepalive);
    return opened;
  }
}

const where = (t: PodPort) => `${t.namespace}/${t.pod}:${t.port}`;

/** Maps the kubelet's error-channel text before the stream is up (a failed dial) to a reply. */
function dialError(target: PodPort, text: string): ProxyError {
  const msg = `pod ${where(target)}: ${text.trim().slice(0, 500)}`;
  if (/timed? ?out/i.test(text)) return new ConnectTimeoutError(msg, { retryable: true });
  return new ConnectionRefusedError(msg, { retryable: true });
}

/** Maps a refused upgrade (the API server's HTTP status) to a reply. */
function upgradeError(target: PodPort, status: number, text: string): ProxyError {
  const detail = statusMessage(text) ?? `HTTP ${status}`;
  const msg = `port-forward to ${where(target)} refused by the API server (${status}): ${detail}`;
  if (status === 403) return new NotAllowedError(msg);
  if (status === 404 || status === 400) return new HostUnreachableError(msg, { retryable: true });
  return new UpstreamApiError(msg, { retryable: status >= 500 });
}

/**
 * Error text that says the kubelet's dial into the pod failed (containerd, CRI-O, socat wordings),
 * as opposed to a connection that was up and then broke ("read: connection reset by peer").
 */
function isDialFailure(text: string): boolean {
  return /failed to connect|dial tcp|connection refused|unable to do port forwarding/i.test(text) && !/reset by peer|broken pipe/i.test(text);
}

class PortForwardStream extends Duplex {
  private readonly prefixPending = [true, true];
  private errorText = '';
  private lingerTimer?: NodeJS.Timeout;
  private clientEnded = false;
  /** The pod side reported an error after data: no more bytes go to the reader. */
  private podEnded = false;
  /** Some payload came from the pod: from now on an error text is a break, never a failed dial. */
  private podSpoke = false;
  private onDialError?: (err: ProxyError) => void;
  private onFirstData?: () => void;
  private onPrefixes?: () => void;

  constructor(
    private readonly ws: WebSocket,
    private readonly target: PodPort,
    private readonly log: Logger,
  ) {
    super({ allowHalfOpen: true });
    ws.on('message', (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    // The pod side closed: end our readable side unless an error already destroyed us.
    ws.on('close', () => {
      clearTimeout(this.lingerTimer);
      if (!this.destroyed) this.push(null);
    });
  }

  /** Resolves with this stream once the tunnel is up (and, with confirmMs, the dial not refused). */
  connected(options: OpenOptions, onUnauthorized: () => void): Promise<Duplex> {
    const { ws, target } = this;
    return new Promise<Duplex>((resolve, reject) => {
      let settled = false;
      let confirmTimer: NodeJS.Timeout | undefined;
      const done = (err?: ProxyError) => {
        if (settled) return;
        settled = true;
        clearTimeout(confirmTimer);
        options.signal.removeEventListener('abort', onAbort);
        this.onDialError = this.onFirstData = this.onPrefixes = undefined;
        if (err) {
          ws.terminate();
          this.destroy();
          reject(err);
        } else {
          resolve(this);
        }
      };
      const onAbort = () => done(new ConnectTimeoutError(`port-forward to ${where(target)} did not open in time`, { cause: options.signal.reason }));
      if (options.signal.aborted) return onAbort();
      options.signal.addEventListener('abort', onAbort);

      ws.once('unexpected-response', (_req, res) => {
        if (res.statusCode === 401) onUnauthorized();
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(upgradeError(target, res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))));
        res.on('error', () => done(upgradeError(target, res.statusCode ?? 0, '')));
      });
      ws.on('error', (err) => {
        if (!settled) done(new UpstreamApiError(`port-forward to ${where(target)} failed: ${err.message}`, { cause: err, retryable: true }));
        else this.destroy(new UpstreamApiError(`port-forward to ${where(target)} broke: ${err.message}`, { cause: err }));
      });
      ws.once('open', () => {
        if (ws.protocol !== V4_PROTOCOL) done(new UpstreamApiError(`API server answered port-forward with subprotocol "${ws.protocol}"`));
      });
      ws.once('close', () => done());
      this.onDialError = (err) => done(err);
      this.onFirstData = () => done();
      this.onPrefixes = () => {
        if (options.confirmMs <= 0) return done();
        confirmTimer = setTimeout(() => done(), options.confirmMs);
      };
    });
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
      if (!this.prefixPending[DATA] && !this.prefixPending[ERROR]) this.onPrefixes?.();
    }
    if (payload.length === 0) return;
    if (channel === ERROR) {
      this.errorText += payload.toString('utf8');
      if (this.onDialError) {
        this.onDialError(dialError(this.target, this.errorText));
        return;
      }
      if (!this.podSpoke && isDialFailure(this.errorText)) {
        // We called it connected without waiting (the port accepted recently), yet the dial
        // failed: no byte reached the pod, so the route may still move this stream elsewhere.
        this.destroy(dialError(this.target, this.errorText));
        return;
      }
      // Mid-stream the pod connection broke (e.g. reset by peer). Deliver what the pod already
      // sent, then end: destroying now would throw away the tail of its response.
      this.log.info({ target: where(this.target), error: this.errorText.trim().slice(0, 500) }, 'pod connection ended with an error');
      this.podEnded = true;
      this.push(null);
      return;
    }
    if (this.podEnded) return;
    this.podSpoke = true;
    this.onFirstData?.();
    if (this.clientEnded) this.armLinger();
    if (!this.push(payload)) this.ws.pause();
  }

  override _read(): void {
    if (this.ws.isPaused) this.ws.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.ws.readyState !== WebSocket.OPEN) {
      callback(new UpstreamApiError(`port-forward to ${where(this.target)} is closed`));
      return;
    }
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
    this.armLinger();
    callback();
  }

  /** Pings the tunnel while it is open; a peer that stopped answering fails the stream. */
  keepAlive(options: KeepaliveOptions): void {
    const stop = startKeepalive(this.ws, options, (silentMs) => {
      this.log.warn({ target: where(this.target), silentMs }, 'port-forward tunnel stopped answering pings; closing it');
      this.destroy(new UpstreamApiError(`port-forward to ${where(this.target)} stopped answering: no pong within ${options.timeoutMs} ms`));
    });
    this.once('close', stop);
  }

  private armLinger(): void {
    clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(() => this.ws.close(1000), HALF_CLOSE_LINGER_MS);
    this.lingerTimer.unref();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    clearTimeout(this.lingerTimer);
    // A close handshake needs the server's close frame, which queues behind pod data we have
    // not read; when we abandon that data (a client cancelled a download) it would stall for
    // ws's 30 s close timeout with the tunnel and the pod's connection still open. Cut instead.
    if (this.ws.readyState === WebSocket.OPEN && !err && this.readableEnded) this.ws.close(1000);
    else if (this.ws.readyState !== WebSocket.CLOSED) this.ws.terminate();
    callback(err);
  }

}
