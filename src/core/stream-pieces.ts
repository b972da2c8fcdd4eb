// Chunks that are pieces of one larger unit. A SPDY DATA frame reaches the proxy cut into tunnel
// messages (the API server relays ≤ 16 KiB reads), so a 32 KiB frame arrives in several chunks.
// Sent to the client as they come, that is several sends per frame; joined, it is a copy of every
// byte (spdy/frame-pieces.ts). The relay asks for pieces (handPiecesOn); an upstream that hands them
// on (its `pieces` member, UpstreamStream) says which continue, and the relay holds those in the client socket (cork) until the unit is
// complete: one write of several buffers (writev), no copy. Other readers (the HTTP client of
// plain-HTTP forwarding) keep getting whole units.

import type { Duplex } from 'node:stream';

/** An upstream stream that can tell which of its chunks continue into the next one. */
export interface PieceHints {
  /** From now on, hand units on piece by piece, as they arrive. */
  handPiecesOn(): void;
  /**
   * Whether `chunk`, just emitted as 'data', is a piece whose unit continues in the next chunk:
   * the rest of a frame already under way (it may still wait on the far end, or on a tunnel held
   * for another reader). Never true for the last piece of a unit.
   */
  continuesAfter(chunk: Buffer): boolean;
}

/**
 * What a transport's open() returns and every route and wrapper passes on to the relay: a byte
 * stream with its piece hints as a typed member. `pieces` is undefined for a stream that gives
 * none (a socket, an SSH channel, a WebSocket pod stream); a Duplex that wraps another must
 * answer with the hints of the stream it wraps (test/unit/piece-hints.test.ts checks each one).
 */
export interface UpstreamStream extends Duplex {
  readonly pieces?: PieceHints;
}
