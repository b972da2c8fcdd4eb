// Bidirectional byte relay between an accepted client socket and an upstream Duplex (SOCKS and
// HTTP CONNECT). Semantics are those of a TCP splice: each direction is flow-controlled on its
// own, a FIN is forwarded as a FIN (half-close), and any error or abort tears down both sides.
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../core/log.js';
import { POD_FIRST_BYTE_GRACE_MS, type OpenedStream } from '../core/types.js';
import type { PieceHints, UpstreamStream } from '../core/stream-pieces.js';
import type { LiveBytes } from './stream-stats.js';

export interface RelayResult {
  bytesFromClient: number;
  bytesToClient: number;
  /** Set when the relay ended abnormally (reset, abort, premature close); first error wins. */
  error?: Error;
}

/**
 * After the client's FIN the upstream side may still send (a half-closed request waiting for its
 * answer), but once it has been silent this long the stream is reset: tear-down is bounded by us,
 * not by the far end (containerd waits ~1 s itself; a stuck peer would wait forever). Not for an
 * upstream that half-closes as TCP does (OpenedStream.tcpHalfClose): its own FIN ends it.
 */
export const TEARDOWN_GRACE_MS = 2000;

/**
 * Moves bytes both ways until both directions are finished or one side fails. `head` (bytes
 * the client sent before the tunnel was open) is written upstream before anything else.
 * Never rejects; resolves exactly once; both streams are destroyed when it resolves.
 */
export function relay(
  client: net.Socket,
  upstream: UpstreamStream,
  head?: Buffer,
  teardownGraceMs: number | undefined = TEARDOWN_GRACE_MS,
  firstByteGraceMs = POD_FIRST_BYTE_GRACE_MS,
): Promise<RelayResult> {
  return new Promise((resolve) => splice(client, upstream, head, teardownGraceMs, firstByteGraceMs, resolve));
}

/**
 * Starts the relay and hands its result to `onEnd` when it is over; returns its byte counters,
 * which move while it runs (status shows a download's bytes as they flow). The listeners call this
 * instead of awaiting relay(): an async function suspended for the connection's life keeps its
 * saved registers — the request, the opened stream, the client's first bytes, stale values from
 * earlier awaits included — and a lingering connection would hold all of that (and three
 * promises) for every young-generation collection to copy (docs/performance.md, "What a
 * lingering connection holds").
 */
export function startRelay(
  client: net.Socket,
  opened: Pick<OpenedStream, 'stream' | 'tcpHalfClose'>,
  head: Buffer | undefined,
  log: Logger,
  onEnd: (result: RelayResult) => void,
): LiveBytes {
  return new Splice(client, opened.stream, head, opened.tcpHalfClose ? undefined : TEARDOWN_GRACE_MS, (result) => {
    try {
      onEnd(result);
    } catch (err) {
      log.error({ err }, 'recording the end of a stream failed');
    }
  });
}

/** relay() with a callback: `resolve` is called exactly once. */
function splice(
  client: net.Socket,
  upstream: UpstreamStream,
  head: Buffer | undefined,
  teardownGraceMs: number | undefined,
  firstByteGraceMs: number,
  resolve: (result: RelayResult) => void,
): void {
  new Splice(client, upstream, head, teardownGraceMs, resolve, firstByteGraceMs);
}

/**
 * One relayed connection. The state of both directions lives in this object and its two Sides,
 * and each stream gets one listener per event (arrow functions made once per Side, as class fields)
 * instead of a closure and a scope per concern: a lingering connection (the runtime keeps a
 * half-closed one ~1 s) holds ~1 KiB less for every young-generation collection to copy — 6.2
 * instead of 7.2 KiB in all (docs/performance.md, "What a lingering connection holds").
 */
class Splice {
  bytesFromClient = 0;
  bytesToClient = 0;
  error: Error | undefined;
  /** The tear-down clock (quiet()); set only after the client's FIN. */
  teardown: NodeJS.Timeout | undefined;
  /** It ran out: the upstream is closed by us, and the client's connection ends, not reset. */
  clockRanOut = false;
  private pending = 2;
  readonly client: Side;
  readonly upstream: Side;

  constructor(
    client: net.Socket,
    upstream: UpstreamStream,
    head: Buffer | undefined,
    /** undefined: no tear-down clock after the client's FIN. */
    readonly teardownGraceMs: number | undefined,
    private readonly resolve: (result: RelayResult) => void,
    private readonly firstByteGraceMs = POD_FIRST_BYTE_GRACE_MS,
  ) {
    this.client = new Side(this, client, true, undefined);
    this.upstream = new Side(this, upstream, false, upstream.pieces);
    this.client.peer = this.upstream;
    this.upstream.peer = this.client;
    if (head && head.length > 0) {
      this.bytesFromClient += head.length;
      upstream.write(head);
    }
    this.client.pumpToPeer();
    // The relay sends a unit's pieces in one write (Side.onData): ask for them unjoined.
    upstream.pieces?.handPiecesOn();
    this.upstream.pumpToPeer();
    if (client.readableEnded) this.onClientEnd();
    this.client.watchDone();
    this.upstream.watchDone();
  }

  /**
   * `fromUpstream`: the far side broke (a tunnel lost, the pod gone), and the client's connection
   * is reset, not ended: a FIN would pass a cut-short download for a whole one.
   */
  fail(err: Error, fromUpstream = false): void {
    this.error ??= err;
    const client = this.client.stream;
    const socket = client as Partial<net.Socket>;
    if (fromUpstream && !this.clockRanOut && !client.destroyed && typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
    else client.destroy();
    this.upstream.stream.destroy();
  }

  /** One side is done (both its directions over, or failed). */
  settle(err?: Error, fromUpstream = false): void {
    if (err) this.fail(err, fromUpstream);
    if (--this.pending > 0) return;
    clearTimeout(this.teardown);
    // Both directions are done; release whatever the streams still hold (autoDestroy may be off).
    this.client.stream.destroy();
    this.upstream.stream.destroy();
    const { bytesFromClient, bytesToClient, error } = this;
    this.resolve(error ? { bytesFromClient, bytesToClient, error } : { bytesFromClient, bytesToClient });
  }

  // The client's FIN starts the tear-down clock; each upstream byte restarts it. A client that
  // is not reading holds the upstream paused (Side.onData): its silence is ours, not the far
  // end's, and the pod's last bytes and FIN may be waiting in it — the clock starts over instead.
  // Bytes held by the cork (a frame whose rest has not come) keep writableNeedDrain up however
  // fast the client reads: that silence is the far end's, so the clock runs out.
  onClientEnd(): void {
    if (!this.upstream.stream.readableEnded) this.quiet();
  }

  quiet(): void {
    if (this.teardownGraceMs === undefined) return;
    clearTimeout(this.teardown);
    const ms = this.bytesToClient > 0 ? this.teardownGraceMs : Math.max(this.teardownGraceMs, this.firstByteGraceMs);
    // A function and an argument, not a closure: nothing more to hold per connection.
    this.teardown = setTimeout(teardownClockRanOut, ms, this);
    this.teardown.unref();
  }
}

function teardownClockRanOut(splice: Splice): void {
  const client = splice.client.stream;
  if (client.writableNeedDrain && client.writableCorked === 0) splice.quiet();
  else {
    // The pod had its time to answer the client's FIN: an end as the runtimes end it, not a break.
    splice.clockRanOut = true;
    splice.upstream.stream.destroy();
  }
}

/**
 * One stream of the relay: the direction from it to its peer, with pipe semantics, byte counting
 * and FIN propagation, and the watch for when it is done. A chunk whose unit continues in the next
 * one (core/stream-pieces.ts) is held in the peer (cork) until the unit is complete, so the pieces
 * go out in one write; pausing for a full peer waits for that too.
 */
class Side {
  peer!: Side;
  private corked = false;
  /** The last chunk written continues in the next one (its unit is incomplete). */
  private midUnit = false;
  private uncorkQueued = false;
  private full = false;
  private done = false;

  constructor(
    private readonly splice: Splice,
    readonly stream: Duplex,
    private readonly isClient: boolean,
    /** The upstream's piece hints, taken once: a stream's hints do not change while it is relayed. */
    private readonly hints: PieceHints | undefined,
  ) {
    // Permanent: a late 'error' (e.g. after destroy) must never become uncaught.
    stream.on('error', this.onError);
  }

  pumpToPeer(): void {
    const src = this.stream;
    src.on('data', this.onData);
    src.on('end', this.onEnd);
    this.peer.stream.on('drain', this.onPeerDrain);
    // The source may have ended before we got it (client sent its request, data and FIN at once).
    if (src.readableEnded) this.endPeer();
    // Callers may hand over a paused socket; adding a 'data' listener does not undo pause().
    src.resume();
  }

  /**
   * Calls Splice.settle once, when the stream has both ended and finished (a TCP splice is over
   * only when both directions are), or with the error or premature close that stopped it. Like
   * stream.finished() on a Duplex, stricter on one point: a close after the readable side reached
   * EOF but before 'end' was emitted (bytes still held back for a slow client) is a premature
   * close here, since those bytes never reached the client.
   */
  watchDone(): void {
    const stream = this.stream;
    stream.on('finish', this.onFinish);
    stream.on('close', this.onClose);
    if (stream.errored) this.finish(stream.errored);
    else if (stream.closed) this.onClose();
    else this.check();
  }

  private readonly onData = (chunk: Buffer | string): void => {
    this.forward(chunk);
    if (!this.isClient && this.splice.teardown) this.splice.quiet();
  };

  private forward(chunk: Buffer | string): void {
    const dst = this.peer.stream;
    const len = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (dst.destroyed || dst.writableEnded) {
      // The peer can no longer take bytes (a Duplex that closed both ways on its own): as with
      // TCP, data sent to a closed socket resets the connection rather than vanishing silently.
      this.splice.fail(new Error('peer closed while data was still being sent'));
      return;
    }
    if (this.isClient) this.splice.bytesFromClient += len;
    else this.splice.bytesToClient += len;
    if (this.hints === undefined || typeof chunk === 'string') {
      if (!dst.write(chunk)) this.stream.pause();
      return;
    }
    // A unit's pieces go out in one write, and so do the units that come in one turn of the
    // event loop (one socket read of the tunnel holds several): the peer is corked until the
    // turn is over (uncorkAfterTurn), or longer while a unit is still incomplete.
    this.midUnit = this.hints.continuesAfter(chunk);
    if (!this.corked) {
      this.corked = true;
      dst.cork();
    }
    if (!dst.write(chunk)) this.full = true;
    if (this.midUnit) return;
    if (!this.uncorkQueued) {
      this.uncorkQueued = true;
      process.nextTick(uncorkAfterTurn, this);
    }
    if (this.full) {
      this.full = false;
      this.stream.pause();
    }
  }

  /** The turn that wrote complete units is over: send them, unless a unit is still incomplete. */
  uncork(): void {
    this.uncorkQueued = false;
    if (this.midUnit || !this.corked) return;
    this.corked = false;
    this.peer.stream.uncork();
  }

  // `on`, not `once`: 'end' comes at most once, and once() would wrap each listener in two more objects.
  private readonly onEnd = (): void => {
    this.endPeer();
    if (this.isClient) this.splice.onClientEnd();
    else clearTimeout(this.splice.teardown);
    this.check();
  };

  private endPeer(): void {
    const dst = this.peer.stream;
    if (!dst.destroyed && !dst.writableEnded) dst.end();
  }

  private readonly onPeerDrain = (): void => {
    this.stream.resume();
  };

  private readonly onFinish = (): void => this.check();

  private readonly onError = (err: Error): void => this.finish(err);

  private readonly onClose = (): void => {
    const stream = this.stream;
    if (stream.readableEnded && stream.writableFinished) return this.finish();
    this.finish(stream.errored ?? prematureClose());
  };

  private check(): void {
    if (this.stream.readableEnded && this.stream.writableFinished) this.finish();
  }

  private finish(err?: Error): void {
    if (this.done) return;
    this.done = true;
    this.splice.settle(err && this.isClient ? clientSideError(err) : err, !this.isClient);
  }
}

/**
 * The client's own failure, said to be the client's: the log's bare "read ECONNRESET" read the
 * same for a client that reset as for a pod or a direct destination that did.
 */
function clientSideError(err: Error): Error {
  const code = (err as NodeJS.ErrnoException).code;
  const message = code === 'ECONNRESET' ? `the client reset its connection (${err.message})` : `the client's connection failed: ${err.message}`;
  return Object.assign(new Error(message, { cause: err }), code === undefined ? {} : { code });
}

/** A function and an argument for process.nextTick, not a closure per unit. */
function uncorkAfterTurn(side: Side): void {
  side.uncork();
}

function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}
