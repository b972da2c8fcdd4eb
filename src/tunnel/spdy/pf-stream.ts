// One TCP stream to a pod port over a SPDY tunnel: an error stream and a data stream (SYN_STREAM
// headers streamtype / port / requestid), as kubectl opens them in client-go
// tools/portforward/portforward.go handleConnection; the kubelet side is
// staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/httpstream.go.
//  - Ports not seen accepting lately: both SYN_REPLYs, then `confirmMs` for error text from the
//    kubelet's dial (SPDY has no "connected" message either). Ports that accepted lately: the
//    stream counts as open as soon as the SYN_STREAMs are on their way.
//  - Error text ("error forwarding port …", or the JSON {message, closeConnection} newer kubelets
//    write) maps to the same typed errors as websocket-v4; after the stream is up it ends the
//    stream after what the pod already sent.
//  - Client FIN → DATA+FIN on the data stream (a real half-close; the runtime then gives the pod
//    about a second to finish). Pod end → FIN from the kubelet: we end the readable side and, as
//    kubectl does, reset the data stream if we have not finished it, so the kubelet never blocks
//    on data nobody reads; later client bytes are dropped. Abort → RST_STREAM(CANCEL) on both.
//  - No SPDY flow control: a reader that falls behind by more than STREAM_QUEUE_MAX holds the
//    whole tunnel until it catches up; writers wait for the tunnel to drain above HIGH_WATER.
import { Duplex } from 'node:stream';
import type { Logger } from '../../core/log.js';
import { ConnectTimeoutError, ConnectionRefusedError, UpstreamApiError, type ProxyError } from '../../core/errors.js';
import type { OpenOptions, PodPort } from '../transport.js';
import type { SpdyStream } from './session.js';
import { HIGH_WATER, type PodTunnel } from './tunnel.js';

/** Bytes a stream may hold for a slow reader before the tunnel stops reading. */
export const STREAM_QUEUE_MAX = 1 << 20;

export const where = (t: PodPort) => `${t.namespace}/${t.pod}:${t.port}`;

/** The kubelet's error-stream text → a reply; JSON from newer kubelets is unwrapped. */
export function errorStreamMessage(text: string): string {
  const t = text.trim();
  if (t.startsWith('{')) {
    try {
      const m = (JSON.parse(t) as { message?: unknown }).message;
      if (typeof m === 'string') return m;
    } catch {
      /* not JSON after all */
    }
  }
  return t;
}

export function dialError(target: PodPort, text: string): ProxyError {
  const message = errorStreamMessage(text);
  const msg = `pod ${where(target)}: ${message.slice(0, 500)}`;
  if (/timed? ?out/i.test(message)) return new ConnectTimeoutError(msg, { retryable: true });
  return new ConnectionRefusedError(msg, { retryable: true });
}

export class SpdyPortForwardStream extends Duplex {
  private data?: SpdyStream;
  private error?: SpdyStream;
  private errorText = '';
  private replies = 0;
  /** No more bytes go to the reader (pod ended, or failed after data). */
  private podEnded = false;
  /** The pod side is gone: client bytes are dropped instead of sent. */
  private discardWrites = false;
  private holding = false;
  private onDialError?: (err: ProxyError) => void;
  private onFirstData?: () => void;
  private onReplies?: () => void;

  constructor(
    private readonly tunnel: PodTunnel,
    private readonly target: PodPort,
    private readonly log: Logger,
    private readonly release: () => void,
  ) {
    // A 64 KiB socket read fits the writable buffer, so the relay does not pause the client per chunk.
    super({ allowHalfOpen: true, readableHighWaterMark: 64 * 1024, writableHighWaterMark: 256 * 1024 });
  }

  /** Resolves with this stream once both streams are accepted (and, with confirmMs, the dial not refused). */
  connected(options: OpenOptions): Promise<Duplex> {
    const target = this.target;
    return new Promise<Duplex>((resolve, reject) => {
      let settled = false;
      let confirmTimer: NodeJS.Timeout | undefined;
      const done = (err?: ProxyError) => {
        if (settled) return;
        settled = true;
        clearTimeout(confirmTimer);
        options.signal.removeEventListener('abort', onAbort);
        this.onDialError = this.onFirstData = this.onReplies = undefined;
        if (err) {
          this.destroy();
          reject(err);
        } else resolve(this);
      };
      const onAbort = () => done(new ConnectTimeoutError(`port-forward to ${where(target)} did not open in time`, { cause: options.signal.reason }));
      if (options.signal.aborted) return onAbort();
      options.signal.addEventListener('abort', onAbort);
      this.onDialError = (err) => done(err);
      this.onFirstData = () => done();
      this.onReplies = () => {
        confirmTimer = setTimeout(() => done(), options.confirmMs);
      };
      try {
        this.openStreams();
      } catch (err) {
        return done(new UpstreamApiError(`port-forward to ${where(target)}: ${(err as Error).message}`, { cause: err, retryable: true }));
      }
      // A port that accepted lately: connected at once, without waiting a round trip for the
      // replies. The kubelet takes DATA right behind a SYN_STREAM (it replies before reading on).
      if (options.confirmMs <= 0) done();
    });
  }

  private openStreams(): void {
    const session = this.tunnel.session;
    const common = { port: String(this.target.port), requestid: this.tunnel.requestId() };
    const error = (this.error = session.openStream({ streamtype: 'error', ...common }));
    const data = (this.data = session.openStream({ streamtype: 'data', ...common }));
    error.onReply = () => {
      error.end(); // we never write on the error stream
      this.replied();
    };
    data.onReply = () => this.replied();
    error.onData = (chunk) => this.onErrorText(chunk);
    error.onReset = () => this.refused('reset the error stream');
    data.onData = (chunk) => this.onPodData(chunk);
    data.onEnd = () => {
      this.onFirstData?.();
      this.podGone();
    };
    data.onReset = () => {
      this.refused('reset the data stream');
      this.podGone();
    };
    error.onSessionClose = data.onSessionClose = (err) => this.tunnelGone(err);
  }

  private replied(): void {
    if (++this.replies === 2) this.onReplies?.();
  }

  /** A reset before the stream is up: the error text if any, else the kubelet turned us away. */
  private refused(what: string): void {
    if (!this.onDialError) return;
    if (this.errorText) this.onDialError(dialError(this.target, this.errorText));
    else this.onDialError(new UpstreamApiError(`port-forward to ${where(this.target)}: the kubelet ${what}`, { retryable: true }));
  }

  private onErrorText(chunk: Buffer): void {
    this.errorText += chunk.toString('utf8');
    if (this.onDialError) return this.onDialError(dialError(this.target, this.errorText));
    // Mid-stream the pod connection broke (e.g. reset by peer): deliver what the pod already sent, then end.
    this.log.info({ target: where(this.target), error: errorStreamMessage(this.errorText).slice(0, 500) }, 'pod connection ended with an error');
    this.podGone();
  }

  private onPodData(chunk: Buffer): void {
    if (this.podEnded) return;
    this.onFirstData?.();
    if (!this.push(chunk) && !this.holding && this.readableLength > STREAM_QUEUE_MAX) {
      this.holding = true;
      this.tunnel.hold(this, true);
    }
  }

  private podGone(): void {
    if (!this.podEnded) {
      this.podEnded = true;
      this.push(null);
    }
    this.discardWrites = true;
    if (this.data && !this.data.localClosed) this.data.reset();
  }

  private tunnelGone(err?: Error): void {
    if (this.onDialError) {
      this.onDialError(new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} closed${err ? `: ${err.message}` : ''}`, { cause: err, retryable: true }));
      return;
    }
    if (err) this.destroy(new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} broke: ${err.message}`, { cause: err }));
    else this.podGone();
  }

  override _read(): void {
    if (this.holding) {
      this.holding = false;
      this.tunnel.hold(this, false);
    }
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.discardWrites) return callback();
    if (!this.data || !this.data.write(chunk)) {
      callback(new UpstreamApiError(`port-forward to ${where(this.target)} is closed`));
      return;
    }
    if (this.tunnel.buffered < HIGH_WATER) callback();
    else this.tunnel.whenDrained(() => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    if (!this.discardWrites) this.data?.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (this.holding) this.tunnel.hold(this, false);
    this.holding = false;
    if (this.data?.open) this.data.reset();
    if (this.error?.open) this.error.reset();
    this.release();
    callback(err);
  }
}
