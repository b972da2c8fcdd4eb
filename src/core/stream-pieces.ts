// Chunks that are pieces of one larger unit. A SPDY DATA frame reaches the proxy cut into tunnel
// messages (the API server relays ≤ 16 KiB reads), so a 32 KiB frame arrives as two chunks. Sent
// to the client as they come, that is two sends per frame; joined, it is a copy of every byte
// (spdy/pf-stream.ts). An upstream that knows more of the same unit follows at once says so, and
// the relay holds the piece in the client socket (cork) until the unit is complete: one write of
// several buffers (writev), no copy.

/** An upstream stream that can tell which of its chunks continue into the next one. */
export interface PieceHints {
  /**
   * Whether `chunk`, just emitted as 'data', is a piece whose unit continues in the next chunk.
   * Only ever true for a chunk the next one follows promptly (no waiting on the far end beyond
   * the rest of a frame already under way), and never for the last piece of a unit.
   */
  continuesAfter(chunk: Buffer): boolean;
}

/** continuesAfter() for any stream: false for streams that give no hints. */
export function continuesAfter(stream: object, chunk: Buffer): boolean {
  const hints = stream as Partial<PieceHints>;
  return typeof hints.continuesAfter === 'function' && hints.continuesAfter(chunk);
}
