// One SPDY/3.1 session over any ordered byte pipe (a WebSocket tunnel, a TCP socket): stream ids,
// SYN_STREAM/SYN_REPLY, DATA with FIN half-close, RST_STREAM, PING, GOAWAY. Used by our client
// transport and by the simulated kubelet. Behaviour follows moby/spdystream connection.go and
// stream.go, the implementation on the other end of every real port-forward:
//  - client stream ids are odd from 1, server ids even from 2, each side strictly increasing;
//    a SYN_STREAM whose id is not above the last one seen is answered with RST PROTOCOL_ERROR;
//  - no flow control: SETTINGS and WINDOW_UPDATE are ignored and never sent;
//  - DATA for a stream we opened is dropped until its SYN_REPLY arrives; DATA for unknown or
//    remotely finished streams is dropped;
//  - PING ids of the peer's parity are echoed; our own come back as replies;
//  - GOAWAY (draft-mbelshe-httpbis-spdy-00 §2.6.6): streams we opened above the peer's
//    lastGoodStreamId, not replied to, were never processed — spdystream drops a SYN_STREAM that
//    crosses its GOAWAY without a word — so they end at once (onUnprocessed) instead of waiting
//    for a SYN_REPLY that never comes;
//  - replies the peer makes us owe (PING echoes, RST_STREAMs refusing its streams) are bounded
//    while they wait to be sent: see MAX_QUEUED_REPLIES;
//  - a stream is forgotten once both directions have ended (FIN both ways) or either side reset it;
//  - any framing or header-block error ends the whole session (GOAWAY PROTOCOL_ERROR, close).
import { HeaderCompressor, HeaderDecompressor, decodeHeaderBlock, encodeHeaderBlock } from './header-block.js';
import {
  FrameReader,
  GoAwayStatus,
  MAX_STREAM_ID,
  RstStatus,
  SpdyProtocolError,
  FLAG_FIN,
  FLAG_UNIDIRECTIONAL,
  encodeGoAway,
  encodePing,
  encodeRstStream,
  encodeSynStream,
  type Frame,
  type Headers,
} from './framer.js';
import { SpdyStream } from './stream.js';
import { OwedReplies } from './owed-replies.js';

/** What a stream we opened keeps of its headers (see openStream). */
const NO_HEADERS: Headers = Object.freeze({});

/** PINGs awaiting an answer at most; older ones are given up. */
const MAX_OUTSTANDING_PINGS = 8;

export { SpdyStream } from './stream.js';
export { MAX_QUEUED_REPLIES, SpdyFloodError } from './owed-replies.js';

/** The byte pipe under a session. write() must keep order; close() ends the pipe. */
export interface SessionWire {
  write(bytes: Buffer): void;
  close(err?: Error): void;
  /**
   * Calls `cb` once every byte written so far has left (been handed to the kernel). Optional: a
   * wire without it counts each write as sent at once (no bound on replies, see MAX_QUEUED_REPLIES).
   */
  whenSent?(cb: () => void): void;
}

export interface SessionHandlers {
  /** A stream the peer opened (SYN_STREAM). Reply to it or reset it. */
  onStream?(stream: SpdyStream): void;
  onGoAway?(lastGoodStreamId: number, status: number): void;
  /** The session is over: the pipe closed, a protocol error, or destroy(). Called once. */
  onClose?(err?: Error): void;
}

export class SpdySession {
  closed = false;
  /** DATA bytes sent so far (keepalive: bytes of ours sent since the peer last spoke may still wait in the kernel). */
  dataBytes = 0;
  /** We sent GOAWAY: no new streams either way. */
  goneAway = false;
  /** The peer sent GOAWAY: we must not open streams. */
  peerGoneAway = false;
  /** Date.now() of the last frame received. */
  lastReceived = Date.now();
  private readonly reader = new FrameReader();
  private readonly compressor = new HeaderCompressor();
  private readonly decompressor = new HeaderDecompressor();
  private readonly streams = new Map<number, SpdyStream>();
  private readonly owed: OwedReplies;
  private readonly pings = new Map<number, { at: number; done: (rtt?: number, err?: Error) => void }>();
  private nextStreamId: number;
  private nextPingId: number;
  private lastPeerStreamId = 0;

  constructor(
    readonly role: 'client' | 'server',
    private readonly wire: SessionWire,
    private readonly handlers: SessionHandlers = {},
  ) {
    this.nextStreamId = role === 'client' ? 1 : 2;
    this.nextPingId = role === 'client' ? 1 : 2;
    this.owed = new OwedReplies(wire);
  }

  /** Streams not yet finished both ways nor reset. */
  get activeStreams(): number {
    return this.streams.size;
  }

  /** Whether openStream() can succeed (ids left, nobody sent GOAWAY, not closed). */
  get canOpen(): boolean {
    return !this.closed && !this.goneAway && !this.peerGoneAway && this.nextStreamId <= MAX_STREAM_ID;
  }

  /**
   * Whether openStream() fails only because this session takes no more streams while it lives on:
   * the peer sent GOAWAY, or the stream ids ran out. A new session to the same peer would take
   * them — unlike a session that is closed, or one we sent GOAWAY on ourselves.
   */
  get outOfStreams(): boolean {
    return !this.closed && !this.goneAway && (this.peerGoneAway || this.nextStreamId > MAX_STREAM_ID);
  }

  /** Bytes from the peer, in order, in chunks of any size. */
  receive(chunk: Buffer): void {
    if (this.closed) return;
    this.lastReceived = Date.now();
    this.reader.push(chunk);
    this.pump();
  }

  openStream(headers: Headers, options: { fin?: boolean } = {}): SpdyStream {
    if (!this.canOpen) throw new Error(this.closed ? 'SPDY session is closed' : 'SPDY session is going away');
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    // The headers go out compressed and are not kept: a stream may live long, and nothing reads them.
    const stream = new SpdyStream(this, id, true, NO_HEADERS);
    this.streams.set(id, stream);
    this.send(encodeSynStream(id, this.compress(headers), { flags: options.fin ? FLAG_FIN : 0 }));
    if (options.fin) stream.localClosed = true;
    return stream;
  }

  /** Sends a PING; resolves with the round trip in ms, rejects when the session ends first. */
  ping(): Promise<number> {
    if (this.closed) return Promise.reject(new Error('SPDY session is closed'));
    const id = this.nextPingId;
    this.nextPingId = this.nextPingId + 2 > 0x7fffffff ? this.nextPingId + 2 - 0x7ffffffe : this.nextPingId + 2;
    return new Promise<number>((resolve, reject) => {
      // A peer that never answers PINGs (while sending data, so keepalive is content) must not
      // make this map grow: past a few outstanding, the oldest is given up.
      if (this.pings.size >= MAX_OUTSTANDING_PINGS) {
        const [oldest, p] = this.pings.entries().next().value!;
        this.pings.delete(oldest);
        p.done(undefined, new Error('PING not answered'));
      }
      this.pings.set(id, { at: Date.now(), done: (rtt, err) => (err ? reject(err) : resolve(rtt!)) });
      this.send(encodePing(id));
    });
  }

  /** Sends GOAWAY once (the last peer stream we accepted); streams already open carry on. */
  goAway(status: number = GoAwayStatus.OK): void {
    if (this.goneAway || this.closed) return;
    this.goneAway = true;
    this.send(encodeGoAway(this.lastPeerStreamId, status));
  }

  /** Ends the session at once: open streams get onSessionClose, the pipe is closed. */
  destroy(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    const streams = [...this.streams.values()];
    this.streams.clear();
    for (const s of streams) s.onSessionClose?.(err);
    for (const p of this.pings.values()) p.done(undefined, err ?? new Error('SPDY session closed'));
    this.pings.clear();
    this.wire.close(err);
    this.handlers.onClose?.(err);
  }

  /** @internal */
  send(...parts: Buffer[]): void {
    if (this.closed) return;
    for (const p of parts) if (p.length > 0) this.wire.write(p);
  }

  /** @internal */
  compress(headers: Headers): Buffer {
    return this.compressor.compress(encodeHeaderBlock(headers));
  }

  /** @internal A stream that ended both ways is forgotten. */
  settle(stream: SpdyStream): void {
    if (stream.localClosed && stream.remoteClosed) this.forget(stream);
  }

  /** @internal */
  forget(stream: SpdyStream): void {
    if (this.streams.get(stream.id) === stream) this.streams.delete(stream.id);
  }

  /** A frame the peer made us owe (PING echo, RST_STREAM refusing its stream): bounded while unsent. */
  private sendReply(frame: Buffer): void {
    const flood = this.owed.flood();
    if (flood) return this.fail(flood);
    this.send(frame);
    this.owed.written();
  }

  private fail(err: unknown): void {
    const e = err instanceof Error ? err : new SpdyProtocolError(String(err));
    this.goAway(GoAwayStatus.PROTOCOL_ERROR);
    this.destroy(e);
  }

  /**
   * Handles complete frames in order. Every header block (SYN_STREAM, SYN_REPLY, HEADERS) goes
   * through the inflater as it comes, to keep the zlib context in step and to fail the session on
   * a bad block before acting on its frame, as spdystream does.
   */
  private pump(): void {
    while (!this.closed) {
      let frame: Frame | undefined;
      let headers: Headers | undefined;
      try {
        frame = this.reader.next();
        if (!frame) return;
        if ('block' in frame) headers = decodeHeaderBlock(this.decompressor.decompress(frame.block));
      } catch (err) {
        return this.fail(err);
      }
      if (frame.type === 'syn_stream') {
        // A stream handler that throws fails the session, not whoever fed us the bytes.
        try {
          this.onSynStream(frame, headers!);
        } catch (err) {
          return this.fail(err);
        }
      } else if (frame.type === 'syn_reply' || frame.type === 'headers') {
        this.withHeaders(frame);
      } else {
        this.handle(frame);
      }
    }
  }

  private withHeaders(f: Extract<Frame, { type: 'syn_reply' | 'headers' }>): void {
    const stream = this.streams.get(f.streamId);
    if (!stream) return;
    if (f.type === 'syn_reply') {
      if (!stream.local || stream.replied) return;
      stream.replied = true;
      stream.onReply?.();
    } else if (!stream.replied) {
      return;
    }
    if (f.flags & FLAG_FIN) this.remoteFin(stream);
  }

  private onSynStream(f: Extract<Frame, { type: 'syn_stream' }>, headers: Headers): void {
    if (this.goneAway) return; // spdystream ignores new streams once it sent GOAWAY
    const peerParity = this.role === 'server' ? 1 : 0;
    if (f.streamId % 2 !== peerParity || f.streamId <= this.lastPeerStreamId) {
      this.sendReply(encodeRstStream(f.streamId, RstStatus.PROTOCOL_ERROR));
      return;
    }
    this.lastPeerStreamId = f.streamId;
    if (!this.handlers.onStream) {
      this.sendReply(encodeRstStream(f.streamId, RstStatus.REFUSED_STREAM));
      return;
    }
    const stream = new SpdyStream(this, f.streamId, false, headers);
    if (f.flags & FLAG_UNIDIRECTIONAL) stream.localClosed = true;
    this.streams.set(f.streamId, stream);
    if (f.flags & FLAG_FIN) stream.remoteClosed = true;
    this.handlers.onStream(stream);
    if (stream.remoteClosed && stream.open) {
      stream.onEnd?.();
      this.settle(stream);
    }
  }

  private handle(frame: Exclude<Frame, { block: Buffer }>): void {
    switch (frame.type) {
      case 'data': {
        const stream = this.streams.get(frame.streamId);
        if (!stream || stream.remoteClosed || stream.resetDone) return;
        if (stream.local && !stream.replied) return; // dropped, as spdystream does
        // The last piece of a frame with a payload is never empty: empty frames carry nothing to deliver.
        if (frame.data.length > 0) stream.onData?.(frame.data, frame.end);
        if (frame.fin && stream.open && !stream.remoteClosed) this.remoteFin(stream);
        return;
      }
      case 'rst_stream': {
        const stream = this.streams.get(frame.streamId);
        if (!stream) return;
        this.forget(stream);
        stream.resetDone = true;
        stream.onReset?.(frame.status);
        return;
      }
      case 'ping': {
        const mine = (frame.id & 1) === (this.nextPingId & 1);
        if (!mine) return this.sendReply(encodePing(frame.id));
        const p = this.pings.get(frame.id);
        this.pings.delete(frame.id);
        p?.done(Date.now() - p.at);
        return;
      }
      case 'goaway':
        this.peerGoneAway = true;
        this.dropUnprocessed(frame.lastGoodStreamId);
        this.handlers.onGoAway?.(frame.lastGoodStreamId, frame.status);
        return;
      case 'settings':
      case 'window_update':
        return; // no flow control in spdystream: ignored
    }
  }

  /**
   * Our streams above the peer's lastGoodStreamId that it never replied to were not processed:
   * gone for both sides (no RST_STREAM goes out for them), and their owners told at once.
   */
  private dropUnprocessed(lastGoodStreamId: number): void {
    const unprocessed = [...this.streams.values()].filter((s) => s.local && !s.replied && s.id > lastGoodStreamId);
    // All gone before any owner hears: one that tears down its other stream must not reset it.
    for (const stream of unprocessed) {
      this.forget(stream);
      stream.resetDone = true;
    }
    for (const stream of unprocessed) stream.onUnprocessed?.();
  }

  private remoteFin(stream: SpdyStream): void {
    stream.remoteClosed = true;
    stream.onEnd?.();
    this.settle(stream);
  }
}
