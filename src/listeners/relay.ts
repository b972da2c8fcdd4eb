// Bidirectional byte relay between an accepted client socket and an upstream Duplex (SOCKS and
// HTTP CONNECT). Semantics are those of a TCP splice: each direction is flow-controlled on its
// own, a FIN is forwarded as a FIN (half-close), and any error or abort tears down both sides.
import type net from 'node:net';
import { finished, type Duplex } from 'node:stream';

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
  return new Promise((resolve) => {
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
    pump(upstream, client, (n) => (bytesToClient += n), fail);

    // The client's FIN starts the tear-down clock; each upstream byte restarts it.
    const quiet = (): void => {
      clearTimeout(teardown);
      teardown = setTimeout(() => upstream.destroy(), teardownGraceMs);
      teardown.unref();
    };
    const onUpstreamData = (): void => {
      if (teardown) quiet();
    };
    const onClientEnd = (): void => {
      if (!upstream.readableEnded) quiet();
      upstream.on('data', onUpstreamData);
    };
    if (client.readableEnded) onClientEnd();
    else client.once('end', onClientEnd);
    upstream.once('end', () => clearTimeout(teardown));

    // finished() waits for both 'end' and 'finish' on a Duplex and reports premature closes.
    finished(client, settle);
    finished(upstream, settle);
  });
}

/** One direction with pipe semantics, plus byte counting and FIN propagation. */
function pump(src: Duplex, dst: Duplex, count: (n: number) => void, fail: (err: Error) => void): void {
  const onData = (chunk: Buffer | string): void => {
    const len = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (dst.destroyed || dst.writableEnded) {
      // The peer can no longer take bytes (a Duplex that closed both ways on its own): as with
      // TCP, data sent to a closed socket resets the connection rather than vanishing silently.
      fail(new Error('peer closed while data was still being sent'));
      return;
    }
    count(len);
    if (!dst.write(chunk)) src.pause();
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
