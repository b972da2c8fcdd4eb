// Bidirectional byte relay between an accepted client socket and an upstream Duplex (SOCKS and
// HTTP CONNECT). Semantics are those of a TCP splice: each direction is flow-controlled on its
// own, a FIN is forwarded as a FIN (half-close), and any error or abort tears down both sides.
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../core/log.js';
import { givesPieceHints, handPiecesOn } from '../core/stream-pieces.js';

export interface RelayResult {
  bytesFromClient: number;
  bytesToClient: number;
  /** Set when the relay ended abnormally (reset, abort, premature close); first error wins. */
  error?: Error;
}

const noop = (): void => {};

/**
 * After the client's FIN the upstream side may still send (a half-closed request waiting for its
 * answer), but once it has been silent this long the stream is reset: tear-down is bounded by us,
 * not by the far end (containerd waits ~1 s itself; a stuck peer would wait forever).
 */
export const TEARDOWN_GRACE_MS = 2000;

/**
 * Moves bytes both ways until both directions are finished or one side fails. `head` (bytes
 * the client sent before the tunnel was open) is written upstream before anything else.
 * Never rejects; resolves exactly once; both streams are destroyed when it resolves.
 */
export function relay(client: net.Socket, upstream: Duplex, head?: Buffer, teardownGraceMs = TEARDOWN_GRACE_MS): Promise<RelayResult> {
  return new Promise((resolve) => splice(client, upstream, head, teardownGraceMs, resolve));
}

/**
 * Starts the relay and hands its result to `onEnd` when it is over. The listeners call this
 * instead of awaiting relay(): an async function suspended for the connection's life keeps its
 * saved registers — the request, the opened stream, the client's first bytes, stale values from
 * earlier awaits included — and a lingering connection would hold all of that (and three
 * promises) for every young-generation collection to copy (docs/performance.md, "What a
 * lingering connection holds").
 */
export function startRelay(client: net.Socket, upstream: Duplex, head: Buffer | undefined, log: Logger, onEnd: (result: RelayResult) => void): void {
  splice(client, upstream, head, TEARDOWN_GRACE_MS, (result) => {
    try {
      onEnd(result);
    } catch (err) {
      log.error({ err }, 'recording the end of a stream failed');
    }
  });
}

/** relay() with a callback: `resolve` is called exactly once. */
function splice(client: net.Socket, upstream: Duplex, head: Buffer | undefined, teardownGraceMs: number, resolve: (result: RelayResult) => void): void {
  let bytesFromClient = 0;
  let bytesToClient = 0;
  let error: Error | undefined;
  let pending = 2;

  const fail = (err: Error): void => {
    error ??= err;
    client.destroy();
    upstream.destroy();
  };
  let teardown: NodeJS.Timeout | undefined;
  const settle = (err?: Error | null): void => {
    if (err) fail(err);
    if (--pending > 0) return;
    clearTimeout(teardown);
    // Both directions are done; release whatever the streams still hold (autoDestroy may be off).
    client.destroy();
    upstream.destroy();
    resolve(error ? { bytesFromClient, bytesToClient, error } : { bytesFromClient, bytesToClient });
  };

  // Permanent listeners: a late 'error' (e.g. after destroy) must never become uncaught.
  client.on('error', noop);
  upstream.on('error', noop);

  if (head && head.length > 0) {
    bytesFromClient += head.length;
    upstream.write(head);
  }
  pump(client, upstream, (n) => (bytesFromClient += n), fail);
  // The relay sends a unit's pieces in one write (pump): ask for them unjoined.
  handPiecesOn(upstream);
  pump(upstream, client, (n) => (bytesToClient += n), fail);

  // The client's FIN starts the tear-down clock; each upstream byte restarts it. A client that
  // is not reading holds the upstream paused (pump): its silence is ours, not the far end's,
  // and the pod's last bytes and FIN may be waiting in it — the clock starts over instead.
  // Bytes held by the cork (a frame whose rest has not come, pump) keep writableNeedDrain up
  // however fast the client reads: that silence is the far end's, so the clock runs out.
  const quiet = (): void => {
    clearTimeout(teardown);
    teardown = setTimeout(() => (client.writableNeedDrain && client.writableCorked === 0 ? quiet() : upstream.destroy()), teardownGraceMs);
    teardown.unref();
  };
  const onUpstreamData = (): void => {
    if (teardown) quiet();
  };
  const onClientEnd = (): void => {
    if (!upstream.readableEnded) quiet();
    upstream.on('data', onUpstreamData);
  };
  // `on`, not `once`: 'end' comes at most once, and once() would wrap each listener in two more objects.
  if (client.readableEnded) onClientEnd();
  else client.on('end', onClientEnd);
  upstream.on('end', () => clearTimeout(teardown));

  whenDone(client, settle);
  whenDone(upstream, settle);
}

/**
 * Calls `done` once, when the stream has both ended and finished (a TCP splice is over only when
 * both directions are), or with the error or premature close that stopped it. Like
 * stream.finished() on a Duplex, with three closures instead of its nine, so a lingering
 * connection (the runtime keeps a half-closed one ~1 s) holds less for every young-generation
 * collection to copy (docs/performance.md, "What a lingering connection holds"). Stricter on
 * one point: a close after the readable side reached EOF but before 'end' was emitted (bytes
 * still held back for a slow client) is a premature close here, since those bytes never reached
 * the client.
 */
function whenDone(stream: Duplex, done: (err?: Error) => void): void {
  let called = false;
  const finish = (err?: Error): void => {
    if (called) return;
    called = true;
    done(err);
  };
  const check = (): void => {
    if (stream.readableEnded && stream.writableFinished) finish();
  };
  const onClose = (): void => {
    if (stream.readableEnded && stream.writableFinished) return finish();
    finish(stream.errored ?? prematureClose());
  };
  stream.on('end', check);
  stream.on('finish', check);
  stream.on('error', finish);
  stream.on('close', onClose);
  if (stream.errored) finish(stream.errored);
  else if (stream.closed) onClose();
  else check();
}

function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/**
 * One direction with pipe semantics, plus byte counting and FIN propagation. A chunk whose unit
 * continues in the next one (core/stream-pieces.ts) is held in `dst` (cork) until the unit is
 * complete, so the pieces go out in one write; pausing for a full `dst` waits for that too.
 */
function pump(src: Duplex, dst: Duplex, count: (n: number) => void, fail: (err: Error) => void): void {
  // Looked up once: whether a stream gives hints does not change while it is relayed.
  const hints = givesPieceHints(src) ? src : undefined;
  let corked = false;
  let full = false;
  const onData = (chunk: Buffer | string): void => {
    const len = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (dst.destroyed || dst.writableEnded) {
      // The peer can no longer take bytes (a Duplex that closed both ways on its own): as with
      // TCP, data sent to a closed socket resets the connection rather than vanishing silently.
      fail(new Error('peer closed while data was still being sent'));
      return;
    }
    count(len);
    const more = hints !== undefined && typeof chunk !== 'string' && hints.continuesAfter(chunk);
    if (more && !corked) {
      corked = true;
      dst.cork();
    }
    if (!dst.write(chunk)) full = true;
    if (more) return;
    if (corked) {
      corked = false;
      dst.uncork();
    }
    if (full) {
      full = false;
      src.pause();
    }
  };
  const onEnd = (): void => {
    if (!dst.destroyed && !dst.writableEnded) dst.end();
  };
  src.on('data', onData);
  src.on('end', onEnd);
  dst.on('drain', () => src.resume());
  // The source may have ended before we got it (client sent its request, data and FIN at once).
  if (src.readableEnded) onEnd();
  // Callers may hand over a paused socket; adding a 'data' listener does not undo pause().
  src.resume();
}
