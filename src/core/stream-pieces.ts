// Chunks that are pieces of one larger unit. A SPDY DATA frame reaches the proxy cut into tunnel
// messages (the API server relays ≤ 16 KiB reads), so a 32 KiB frame arrives in several chunks.
// Sent to the client as they come, that is several sends per frame; joined, it is a copy of every
// byte (spdy/frame-pieces.ts). The relay asks for pieces (handPiecesOn); an upstream that hands them
// on says which continue, and the relay holds those in the client socket (cork) until the unit is
// complete: one write of several buffers (writev), no copy. Other readers (the HTTP client of
// plain-HTTP forwarding) keep getting whole units.

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

/** Whether `stream` gives piece hints. */
export function givesPieceHints<T extends object>(stream: T): stream is T & PieceHints {
  const hints = stream as Partial<PieceHints>;
  return typeof hints.handPiecesOn === 'function' && typeof hints.continuesAfter === 'function';
}

/** handPiecesOn() for any stream: streams that give no hints are left as they are. */
export function handPiecesOn(stream: object): void {
  if (givesPieceHints(stream)) stream.handPiecesOn();
}

/** continuesAfter() for any stream: false for streams that give no hints. */
export function continuesAfter(stream: object, chunk: Buffer): boolean {
  return givesPieceHints(stream) && stream.continuesAfter(chunk);
}
