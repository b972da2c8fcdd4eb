// One SPDY stream of a session (session.ts): the callbacks its owner sets, and DATA, FIN, RST and
// SYN_REPLY going out. Follows moby/spdystream stream.go (Write = one DATA frame, Close = empty
// DATA with FIN, Reset = RST_STREAM CANCEL, SendReply once).
import { FLAG_FIN, RstStatus, dataFrameHeader, encodeRstStream, encodeSynReply, type Headers } from './framer.js';
import type { SpdySession } from './session.js';

/** DATA frames we send carry at most this much (spdystream's io.Copy writes 32 KiB frames). */
const MAX_DATA_CHUNK = 64 * 1024;

export class SpdyStream {
  /** Local streams: the peer's SYN_REPLY arrived. Remote streams: we sent ours. */
  replied = false;
  localClosed = false;
  remoteClosed = false;
  resetDone = false;
  /** The peer accepted our stream (SYN_REPLY; its headers are not needed for port-forward). */
  onReply?: () => void;
  /**
   * Payload as it arrives: a DATA frame may come in several pieces (spdy/framer.ts FrameReader);
   * `frameEnd` is true on the piece that completes its frame. Empty frames are not delivered.
   */
  onData?: (chunk: Buffer, frameEnd: boolean) => void;
  /** The peer sent FIN: no more data will arrive. */
  onEnd?: () => void;
  /** The peer reset the stream (status from RstStatus). */
  onReset?: (status: number) => void;
  /** The session ended while this stream was open. */
  onSessionClose?: (err?: Error) => void;
  /**
   * The peer's GOAWAY says it never processed this stream of ours (its id is above
   * lastGoodStreamId, and no SYN_REPLY came): it is gone, and may be opened again elsewhere.
   */
  onUnprocessed?: () => void;
  /**
   * Whoever set the callbacks above. The session calls them as methods (`this` is the stream),
   * so callbacks shared by many streams can find their owner here instead of each stream
   * needing closures of its own.
   */
  owner?: object;

  constructor(
    private readonly session: SpdySession,
    readonly id: number,
    readonly local: boolean,
    /** The peer's SYN_STREAM headers; empty on streams we opened (session.ts openStream). */
    readonly headers: Headers,
  ) {}

  get open(): boolean {
    return !this.resetDone && !(this.localClosed && this.remoteClosed);
  }

  /** Sends DATA frames; false when the stream can no longer send. */
  write(data: Buffer): boolean {
    if (this.localClosed || this.resetDone || this.session.closed) return false;
    this.session.dataBytes += data.length;
    for (let off = 0; off < data.length; off += MAX_DATA_CHUNK) {
      const chunk = data.subarray(off, off + MAX_DATA_CHUNK);
      this.session.send(dataFrameHeader(this.id, chunk.length, false), chunk);
    }
    return true;
  }

  /** Half-close: an empty DATA frame with FIN. */
  end(): void {
    if (this.localClosed || this.resetDone || this.session.closed) return;
    this.localClosed = true;
    this.session.send(dataFrameHeader(this.id, 0, true));
    this.session.settle(this);
  }

  /** RST_STREAM (CANCEL by default); the stream is gone for both sides. */
  reset(status: number = RstStatus.CANCEL): void {
    if (this.resetDone || (this.localClosed && this.remoteClosed)) return;
    this.resetDone = true;
    if (!this.session.closed) this.session.send(encodeRstStream(this.id, status));
    this.session.forget(this);
  }

  /** Server side: accept the stream (SYN_REPLY), optionally finishing our direction at once. */
  reply(headers: Headers = {}, fin = false): void {
    if (this.local || this.replied || this.resetDone || this.session.closed) return;
    this.replied = true;
    this.session.send(encodeSynReply(this.id, this.session.compress(headers), fin ? FLAG_FIN : 0));
    if (fin) {
      this.localClosed = true;
      this.session.settle(this);
    }
  }
}
