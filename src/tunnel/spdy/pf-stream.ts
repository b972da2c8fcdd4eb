// One TCP stream to a pod port over a SPDY tunnel: an error stream and a data stream (SYN_STREAM
// headers streamtype / port / requestid), as kubectl opens them in client-go
// tools/portforward/portforward.go handleConnection; the kubelet side is
// staging/src/k8s.io/kubelet/pkg/cri/streaming/portforward/httpstream.go.
//  - When the stream counts as connected and what error text means: pod-stream.ts, shared with
//    websocket-v4. "Tunnel up" is both SYN_REPLYs here; for a port that accepted lately it is the
//    moment the SYN_STREAMs are on their way.
//  - Client FIN → DATA+FIN on the data stream (a real half-close; the runtime then gives the pod
//    about a second to finish). Pod end → FIN from the kubelet: we end the readable side and, as
//    kubectl does, reset the data stream if we have not finished it, so the kubelet never blocks
//    on data nobody reads; later client bytes are dropped. Abort → RST_STREAM(CANCEL) on both.
//  - A failed dial arrives in whatever order the kubelet and runtime send it: containerd's FIN on
//    the data stream, then the text, then RST on the error stream; or text first; or RST alone.
//    A data FIN therefore waits for the error stream to finish (text before the pod spoke = failed
//    dial, after = a broken connection; a clean FIN = the pod closed); a data RST before the pod
//    spoke is a refusal.
//  - "Sandbox not found" text retires the whole tunnel (hooks.retire): the session outlived its pod.
//  - A GOAWAY that crossed our SYN_STREAMs (session.ts onUnprocessed), or a tunnel that takes no
//    more streams: the kubelet never took the pair, so it opens again on a fresh tunnel to the same
//    pod (hooks.reopen) and what the client wrote goes there again (goaway-replay.ts). The route
//    never hears of it, unless that fails twice over: then the stream fails, retryable.
//  - No SPDY flow control: a reader that falls behind by more than STREAM_QUEUE_MAX holds the
//    whole tunnel until it catches up (or is reset: tunnel.ts); writers wait above HIGH_WATER.
//  - DATA frames come cut by tunnel messages: frame-pieces.ts hands them on piece by piece or joined.
import type { Duplex } from 'node:stream';
import type { PieceHints } from '../../core/stream-pieces.js';
import type { Logger } from '../../core/log.js';
import { UpstreamApiError, errorMessage } from '../../core/errors.js';
import type { OpenOptions, PodPort } from '../transport.js';
import { PodStream, isSandboxGone, where } from '../pod-stream.js';
import type { SpdyStream } from './session.js';
import { HIGH_WATER, type PodTunnel } from './tunnel.js';
import { FramePieces, JoinedFrame } from './frame-pieces.js';
import { GoAwayReplay, type PairOwner } from './goaway-replay.js';
import type { PodStreamHooks, TunnelSlot } from './tunnel-slot.js';

/** The most of one error message we keep (PodStream keeps 4 KiB of error text in all). */
const ERROR_MESSAGE_MAX = 8 * 1024;

/** Bytes a stream may hold for a slow reader before the tunnel stops reading. */
export const STREAM_QUEUE_MAX = 1 << 20;
const SILENT_TUNNEL = 'the tunnel went silent before the kubelet answered the stream';
const STALE_TUNNEL = 'the API server closed the tunnel before the kubelet took the stream (its kubelet went away since it opened)';
/** After a data FIN, the error stream gets this long to say why (or end). */
const ERROR_STREAM_WAIT_MS = 5000;

export class SpdyPortForwardStream extends PodStream implements PieceHints, PairOwner {
  private data?: SpdyStream;
  private error?: SpdyStream;
  private replies = 0;
  /** No more bytes go to the reader (pod ended, or failed after data). */
  private podEnded = false;
  /** The pod side is gone: client bytes are dropped instead of sent. */
  private discardWrites = false;
  private holding = false;
  /** FIN or RST on the error stream: no more error text can come. */
  private errorClosed = false;
  /** FIN on the data stream arrived and waits for the error stream's verdict. */
  private podFinished = false;
  private verdictTimer?: NodeJS.Timeout;
  /** The error message under way, joined from its pieces. */
  private errorMessage?: JoinedFrame;
  /** DATA frames cut into pieces by tunnel messages: handed on as they come, or joined. */
  private readonly frames = new FramePieces();
  /** Connected without waiting for the replies (a port that accepted lately). */
  private warm = false;
  /** What a GOAWAY crossing the pair would need written again; only until both replies are in. */
  private replay?: GoAwayReplay;
  /** Why the pair last opened again on a new tunnel. */
  private movedBecause?: string;

  constructor(
    /** Both change when a GOAWAY moves the stream to another tunnel. */
    private tunnel: PodTunnel,
    target: PodPort,
    log: Logger,
    private hooks: PodStreamHooks,
  ) {
    // A 64 KiB socket read fits the writable buffer, so the relay does not pause the client per chunk.
    super(target, log, { readableHighWaterMark: 64 * 1024, writableHighWaterMark: 256 * 1024 });
  }

  /** Resolves with this stream once open (pod-stream.ts); a warm port does not wait for the replies. */
  open(options: OpenOptions): Promise<Duplex> {
    // A port that accepted lately: connected at once, without waiting a round trip for the
    // replies. The kubelet takes DATA right behind a SYN_STREAM (it replies before reading on).
    this.warm = options.confirmMs <= 0;
    return this.connected(options, () => this.openPair());
  }

  /** Opens the pair on the tunnel (a warm stream is then open); false when the tunnel took none. */
  private openPair(): boolean {
    try {
      this.openStreams();
    } catch (err) {
      if (this.tunnel.session.outOfStreams) this.notTaken('the tunnel takes no more streams (GOAWAY)');
      // Closed, or retired by us (idle, pod gone): nothing was sent; another endpoint may take it.
      else this.failStream(new UpstreamApiError(`port-forward to ${where(this.target)}: ${errorMessage(err)}`, { cause: err, retryable: true }));
      return false;
    }
    if (this.warm) this.tunnelReady();
    return true;
  }

  private openStreams(): void {
    const session = this.tunnel.session;
    const common = { port: String(this.target.port), requestid: this.tunnel.requestId() };
    const error = (this.error = session.openStream({ streamtype: 'error', ...common }));
    // We never write on the error stream: its FIN goes right behind its SYN_STREAM, as kubectl
    // v1.32 sends it (the capture in test/unit/spdy-framer.test.ts), in the same tunnel message.
    error.end();
    const data = (this.data = session.openStream({ streamtype: 'data', ...common }));
    // Callbacks shared by every stream of this class (see SpdyStream.owner): a connection that
    // lingers (the runtime keeps a half-closed one ~1 s) holds no closures of its own here.
    error.owner = data.owner = this;
    error.onReply = data.onReply = SpdyPortForwardStream.onReply;
    error.onData = SpdyPortForwardStream.onErrorData;
    error.onEnd = SpdyPortForwardStream.onErrorEnd;
    error.onReset = SpdyPortForwardStream.onErrorReset;
    data.onData = SpdyPortForwardStream.onData;
    data.onEnd = SpdyPortForwardStream.onDataEnd;
    data.onReset = SpdyPortForwardStream.onDataReset;
    error.onSessionClose = data.onSessionClose = SpdyPortForwardStream.onSessionClose;
    error.onUnprocessed = data.onUnprocessed = SpdyPortForwardStream.onUnprocessed;
    this.tunnel.replies.opened();
  }

  /** Client bytes kept to be written again should a GOAWAY turn the pair away (tests). */
  get keptForReplay(): number {
    return this.replay?.keptBytes ?? 0;
  }

  private static ownerOf(stream: SpdyStream): SpdyPortForwardStream {
    return stream.owner as SpdyPortForwardStream;
  }

  private static onReply(this: SpdyStream): void {
    const self = SpdyPortForwardStream.ownerOf(this);
    self.tunnel.replies.replied();
    self.replied();
  }

  // The kubelet writes each error message at once (one DATA frame), but the frame may reach us
  // in pieces: classify the whole message, decoded as a whole (a character may straddle pieces).
  // Kept to ERROR_MESSAGE_MAX bytes: a server cannot make us hold a 16 MiB frame.
  private static onErrorData(this: SpdyStream, chunk: Buffer, frameEnd: boolean): void {
    const self = SpdyPortForwardStream.ownerOf(this);
    const message = (self.errorMessage ??= new JoinedFrame(ERROR_MESSAGE_MAX)).add(chunk, frameEnd);
    if (message) self.errorFromKubelet(message.toString('utf8'));
  }

  private static onErrorEnd(this: SpdyStream): void {
    SpdyPortForwardStream.ownerOf(this).errorStreamClosed();
  }

  private static onErrorReset(this: SpdyStream): void {
    const self = SpdyPortForwardStream.ownerOf(this);
    self.refused('reset the error stream');
    self.errorStreamClosed();
  }

  private static onData(this: SpdyStream, chunk: Buffer, frameEnd: boolean): void {
    SpdyPortForwardStream.ownerOf(this).onPodData(chunk, frameEnd);
  }

  private static onDataEnd(this: SpdyStream): void {
    const self = SpdyPortForwardStream.ownerOf(this);
    self.podFinished = true;
    // No more bytes come for this stream: while the verdict is awaited it must not hold the tunnel.
    self.letGo();
    if (!self.errorClosed) {
      self.verdictTimer = setTimeout(() => self.errorStreamClosed(), ERROR_STREAM_WAIT_MS);
      self.verdictTimer.unref();
    }
    self.settlePodEnd();
  }

  private static onDataReset(this: SpdyStream): void {
    SpdyPortForwardStream.ownerOf(this).dataReset();
  }

  private static onSessionClose(this: SpdyStream, err?: Error): void {
    SpdyPortForwardStream.ownerOf(this).tunnelGone(err);
  }

  /** Called for each stream of the pair the GOAWAY left out; the first one decides. */
  private static onUnprocessed(this: SpdyStream): void {
    const self = SpdyPortForwardStream.ownerOf(this);
    if (self.destroyed || self.replay?.moving || (this !== self.data && this !== self.error)) return;
    self.notTaken('the kubelet closed the tunnel (GOAWAY) before it took the stream');
  }

  /** The kubelet never took the pair: it opens again on a new tunnel (goaway-replay.ts), or fails. */
  private notTaken(why: string): void {
    if (this.error?.open) this.error.reset(); // the one of the pair the kubelet did take, if any
    if (this.data?.open) this.data.reset();
    this.movedBecause = why;
    const err = new UpstreamApiError(`port-forward to ${where(this.target)}: ${why}`, { retryable: true });
    (this.replay ??= new GoAwayReplay()).move(this, this.hooks, this.target, err);
  }

  /** PairOwner (goaway-replay.ts): the stream moves to `slot`'s tunnel and opens its pair there. */
  adopt(slot: TunnelSlot): SpdyStream | undefined {
    this.hooks.release();
    if (this.tunnel.awaitAnswer(this, false)) slot.tunnel.awaitAnswer(this, true);
    this.tunnel = slot.tunnel;
    this.hooks = slot.hooks;
    this.replies = 0;
    if (!this.openPair()) return undefined;
    if (this.movedBecause === SILENT_TUNNEL || this.movedBecause === STALE_TUNNEL)
      this.log.info({ target: where(this.target) }, `${this.movedBecause}; opened it again on a new tunnel`);
    else this.log.info({ target: where(this.target) }, 'the kubelet did not take the stream (GOAWAY); opened it again on a new tunnel');
    return this.data;
  }

  protected override errorFromKubelet(text: string): void {
    // The kubelet's verdict first (a cold port's open fails with it: 0x04), then the tunnel goes:
    // retiring it first closed this stream as "tunnel closed" (0x01) and lost the text.
    super.errorFromKubelet(text);
    if (isSandboxGone(text)) this.hooks.retire();
  }

  private errorStreamClosed(): void {
    this.errorClosed = true;
    clearTimeout(this.verdictTimer);
    this.settlePodEnd();
  }

  /**
   * The pod's FIN counts once the error stream ended without a word: the runtime closes the data
   * stream before the kubelet writes why, so text after it (the pod's connection was reset) must
   * still fail the stream rather than pass a cut-short download on as whole.
   */
  private settlePodEnd(): void {
    if (!this.podFinished || this.destroyed || !this.errorClosed) return;
    this.podFinished = false;
    this.podEndedEarly();
    this.endFromPod();
  }

  private dataReset(): void {
    if (this.isOpening) return this.refused('reset the data stream');
    if (this.destroyed) return;
    if (!this.podHasSpoken) {
      // Turned away without a word before the pod answered: nothing reached a pod.
      this.destroy(new UpstreamApiError(`port-forward to ${where(this.target)}: the kubelet reset the stream before the pod answered`, { retryable: true }));
      return;
    }
    this.endFromPod();
  }

  private replied(): void {
    if (++this.replies < 2) return;
    this.replay = undefined; // the kubelet has the pair: nothing will be written again
    this.tunnelReady();
  }

  /** A reset before the stream is up: the kubelet turned us away (error text, if any, came first). */
  private refused(what: string): void {
    this.failOpening(new UpstreamApiError(`port-forward to ${where(this.target)}: the kubelet ${what}`, { retryable: true }));
  }

  private onPodData(piece: Buffer, frameEnd: boolean): void {
    if (this.podEnded || this.destroyed) return;
    // A reader keeps up when it takes each chunk as it is pushed ('data' emitted within push).
    const chunk = this.frames.take(piece, frameEnd, this.readableFlowing === true && this.readableLength === 0);
    if (chunk) this.pushFromPod(chunk);
  }

  private pushFromPod(chunk: Buffer): void {
    this.podSending();
    this.tunnel.awaitAnswer(this, false);
    if (!this.push(chunk) && !this.holding && this.readableLength > STREAM_QUEUE_MAX) {
      this.holding = true;
      this.tunnel.hold(this, true);
    }
  }

  /** Its piece hints (core/stream-pieces.ts UpstreamStream): the stream itself gives them. */
  get pieces(): PieceHints {
    return this;
  }

  handPiecesOn(): void {
    this.frames.piecesWanted = true;
  }

  continuesAfter(chunk: Buffer): boolean {
    return this.frames.continuesAfter(chunk);
  }

  /** Pod end or break: end the readable side and, as kubectl does, reset a data stream we have not finished. */
  private endFromPod(): void {
    if (!this.podEnded && !this.destroyed) {
      this.podEnded = true;
      this.push(null);
    }
    // No byte comes for this stream any more: it must not hold the tunnel for its slow reader
    // (Node calls _read on no ended stream, so the hold would last until the client closes).
    this.letGo();
    this.discardWrites = true;
    if (this.data && !this.data.localClosed) this.data.reset();
  }

  private tunnelGone(err?: Error): void {
    // The tunnel answered no PING while this pair waited for its replies: the kubelet most likely
    // never had it, and the client has written nothing (or not yet been told it is connected).
    if (this.tunnel.wentSilent && this.replies < 2 && (this.isOpening || (this.replay?.nothingWritten ?? true))) {
      if (!this.replay?.moving) this.notTaken(SILENT_TUNNEL); // once for the pair
      return;
    }
    // Closed cleanly by the API server before the kubelet took the pair: the kubelet went away
    // after the tunnel opened (it restarted), and our SYN_STREAMs were the write that told the API
    // server. Nothing reached the pod: a new tunnel to it may well be taken.
    if (!err && this.tunnel.closedByServer && this.replies < 2 && !this.podHasSpoken) {
      if (!this.replay?.moving) this.notTaken(STALE_TUNNEL);
      return;
    }
    if (this.isOpening) {
      this.failOpening(
        new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} closed${err ? `: ${errorMessage(err)}` : ''}`, {
          cause: err,
          retryable: true,
        }),
      );
      return;
    }
    // Its pod deleted before the kubelet took this pair (a warm stream is called open before the
    // replies): nothing reached the pod, so the route may move it to another endpoint.
    if (err && this.tunnel.podWentAway && this.replies < 2 && !this.podHasSpoken)
      this.destroy(new UpstreamApiError(`port-forward to ${where(this.target)}: the pod went away before the kubelet took the stream`, { retryable: true }));
    else if (err)
      this.destroy(new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} broke: ${errorMessage(err)}`, { cause: err }));
    // A tunnel that ends cleanly inside a DATA frame cut the pod's bytes short: a break, not an end.
    else if (this.frames.midFrame)
      this.destroy(new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} closed in the middle of a DATA frame`));
    // A warm stream is called open before the kubelet's replies; a tunnel that closes before both
    // came (the API server ends a tunnel whose kubelet died when we next write) never took it to
    // the pod: the route may move it, and the client must not take an empty end for the pod's.
    else if (this.replies < 2 && !this.podHasSpoken)
      this.destroy(
        new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} closed before the kubelet took the stream`, {
          retryable: true,
        }),
      );
    // The API server ended the tunnel before the pod's FIN (its kubelet restarted): the pod's
    // bytes were cut short, even between frames; a FIN would pass a partial download on as whole.
    else if (this.tunnel.closedByServer && !this.podFinished && !this.podEnded)
      this.destroy(
        new UpstreamApiError(`port-forward tunnel to ${this.target.namespace}/${this.target.pod} closed by the API server before the pod ended the stream`),
      );
    else this.endFromPod();
  }

  override _read(): void {
    this.letGo();
  }

  /** The tunnel may read again as far as this stream is concerned. */
  private letGo(): void {
    if (!this.holding) return;
    this.holding = false;
    this.tunnel.hold(this, false);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.discardWrites) return callback();
    // Kept until the kubelet took the pair; during a move, written with the rest once moved.
    if (this.replies < 2 && (this.replay ??= new GoAwayReplay()).keep(chunk, callback)) return;
    if (!this.data || !this.data.write(chunk)) {
      callback(new UpstreamApiError(`port-forward to ${where(this.target)} is closed`));
      return;
    }
    this.tunnel.awaitAnswer(this, true); // a reader behind is reset only for streams that wait
    this.afterWrite(callback);
  }

  /** PairOwner: `callback` once the tunnel has room for more. */
  afterWrite(callback: () => void): void {
    if (this.tunnel.buffered < HIGH_WATER) callback();
    else this.tunnel.whenDrained(() => callback());
  }

  override _final(callback: (err?: Error | null) => void): void {
    if (this.replies < 2) (this.replay ??= new GoAwayReplay()).keepFin();
    if (!this.discardWrites) this.data?.end();
    callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.letGo();
    this.tunnel.awaitAnswer(this, false);
    if (this.data?.open) this.data.reset();
    if (this.error?.open) this.error.reset();
    clearTimeout(this.verdictTimer);
    this.replay?.abandon();
    this.hooks.release();
    callback(err);
  }
}
