// A stream that may still move to another endpoint until the pod has sent its first byte.
//
// PodStreams calls a port that accepted recently "connected" as soon as its tunnel is up, to
// spare warm connections the wait for the kubelet's dial (see PodStreamsOptions.confirmMs). If
// that pod has since stopped listening (its container crashed and is restarting while still
// marked ready), the refusal arrives after the client was told "connected". The kubelet dials
// before it forwards any byte, so nothing the client sent reached that pod: we replay it to the
// next endpoint and the client never notices. Once the pod has spoken, or the client has sent
// more than we keep for replay, the stream is committed and behaves like the one underneath.
import { Duplex } from 'node:stream';
import { ProxyError } from '../../core/errors.js';
import type { PieceHints, UpstreamStream } from '../../core/stream-pieces.js';
import { MAX_REPLAY_BYTES } from '../../tunnel/transport.js';

/**
 * Opens the next endpoint after `err`; undefined when none is left (then `err` ends the stream).
 * `signal` aborts when this stream is destroyed meanwhile.
 */
export type Reopen = (err: ProxyError, signal: AbortSignal) => Promise<UpstreamStream | undefined>;

const noop = (): void => {};

export class RetryBeforeFirstByte extends Duplex implements UpstreamStream, PieceHints {
  private inner?: UpstreamStream;
  /** What the client wrote so far; undefined once committed (no retry possible any more). */
  private replay?: Buffer[] = [];
  private replayBytes = 0;
  private clientEnded = false;
  private waitingWrite?: (err?: Error | null) => void;
  private detach = noop;
  /** Made only when a move starts: aborting one costs an AbortError with a stack trace. */
  private gone?: AbortController;
  /** The reader asked for pieces (handPiecesOn): every stream underneath is asked too. */
  private piecesWanted = false;

  constructor(
    first: UpstreamStream,
    private readonly reopen: Reopen,
    private readonly maxReplay = MAX_REPLAY_BYTES,
  ) {
    super({ allowHalfOpen: true });
    // Handed through the router and a listener before the relay listens: an early failure must
    // not become an uncaught 'error' in between (the relay's listeners still hear it).
    this.on('error', noop);
    this.attach(first);
  }

  /** Whether the stream can still move (tests and logs). */
  get committed(): boolean {
    return this.replay === undefined;
  }

  /**
   * The hints of the stream underneath, and of any it moves to (core/stream-pieces.ts): asked
   * through this wrapper, since the stream underneath may change.
   */
  get pieces(): PieceHints {
    return this;
  }

  /** Pieces from the stream underneath, and from any it moves to. */
  handPiecesOn(): void {
    this.piecesWanted = true;
    this.inner?.pieces?.handPiecesOn();
  }

  /** Its chunks pass through as they are: the stream underneath knows which continue. */
  continuesAfter(chunk: Buffer): boolean {
    return this.inner?.pieces?.continuesAfter(chunk) ?? false;
  }

  private attach(inner: UpstreamStream): void {
    this.inner = inner;
    if (this.piecesWanted) inner.pieces?.handPiecesOn();
    const onData = (chunk: Buffer): void => {
      this.commit();
      if (!this.push(chunk)) inner.pause();
    };
    const onEnd = (): void => {
      this.commit();
      this.push(null);
    };
    const onError = (err: Error): void => this.innerFailed(inner, err);
    const onDrain = (): void => this.releaseWrite();
    // Closed without an end or an error (destroyed under us): do not wait forever for either.
    const onClose = (): void => {
      if (!inner.readableEnded) this.destroy(new Error('the upstream stream closed unexpectedly'));
    };
    inner.on('data', onData);
    inner.on('end', onEnd);
    inner.on('error', onError);
    inner.on('drain', onDrain);
    inner.on('close', onClose);
    // A late error from a stream we let go of must never become uncaught.
    inner.on('error', noop);
    // Failed between its open and now: its 'error' and 'close' went out on process.nextTick, before
    // the promise that handed it here settled (a refusal in the same burst of frames as the tunnel's
    // set-up). Heard now, or the client would wait for bytes that never come.
    if (inner.destroyed) queueMicrotask(() => (inner.errored ? onError(inner.errored) : onClose()));
    this.detach = () => {
      inner.off('data', onData);
      inner.off('end', onEnd);
      inner.off('error', onError);
      inner.off('drain', onDrain);
      inner.off('close', onClose);
    };
  }

  private commit(): void {
    this.replay = undefined;
    this.replayBytes = 0;
  }

  private innerFailed(inner: UpstreamStream, err: Error): void {
    if (this.destroyed || inner !== this.inner) return;
    if (!this.replay || !(err instanceof ProxyError) || !err.retryable) {
      this.destroy(err);
      return;
    }
    this.detach();
    this.inner = undefined;
    inner.destroy();
    this.gone ??= new AbortController();
    this.reopen(err, this.gone.signal).then(
      (next) => this.continueOn(next, err),
      (reopenErr: unknown) => this.destroy(reopenErr instanceof Error ? reopenErr : err),
    );
  }

  /** Continues on `next`: replay what the client sent, pass on its FIN, release a waiting write. */
  private continueOn(next: UpstreamStream | undefined, cause: ProxyError): void {
    if (this.destroyed) {
      next?.on('error', noop);
      next?.destroy();
      return;
    }
    if (!next || !this.replay) {
      // Nowhere left to go, or the client sent more than we kept while we were moving.
      next?.on('error', noop);
      next?.destroy();
      this.destroy(cause);
      return;
    }
    this.attach(next);
    for (const chunk of this.replay) next.write(chunk);
    if (this.clientEnded) next.end();
    this.releaseWrite();
  }

  private releaseWrite(): void {
    const cb = this.waitingWrite;
    this.waitingWrite = undefined;
    cb?.();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    if (this.replay) {
      if (this.replayBytes + chunk.length <= this.maxReplay) {
        this.replay.push(chunk);
        this.replayBytes += chunk.length;
      } else {
        this.commit();
      }
    }
    if (!this.inner) {
      // Between endpoints: the chunk is in the replay (or the move will fail); wait for it.
      this.waitingWrite = callback;
      return;
    }
    if (this.inner.write(chunk)) callback();
    else this.waitingWrite = callback;
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.clientEnded = true;
    this.inner?.end();
    callback();
  }

  override _read(): void {
    this.inner?.resume();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.detach();
    this.gone?.abort();
    this.inner?.destroy();
    this.inner = undefined;
    this.releaseWrite();
    callback(err);
  }
}
