// One SPDY stream's DATA frames as they reach pf-stream.ts: in pieces, wherever the tunnel's
// messages cut them (the API server relays reads of at most 16 KiB). kubectl's framer hands its
// connection one write per frame; so do we: the relay asks for pieces (handPiecesOn) and, while it
// keeps up, gets each at once, all but the last marked as continuing (continuesAfter,
// core/stream-pieces.ts), and sends them in one write with no copy. Other readers, and a relay
// that has fallen behind, get the frame joined. Either way a frame larger than FRAME_JOIN_MAX goes
// out in parts. A frame read as one message (the kubelet's error text) is joined, up to a cap
// (JoinedFrame).

const FRAME_JOIN_MAX = 64 * 1024;

export class FramePieces {
  /** The reader takes pieces (handPiecesOn): the relay, which sends a frame's pieces in one write. */
  piecesWanted = false;
  /** Part of a DATA frame has come and its end has not. */
  midFrame = false;
  /** Pieces of the frame under way, held to be joined, and their size. */
  private pieces: Buffer[] = [];
  private bytes = 0;
  /** Bytes of the frame under way handed on piece by piece, and the last such piece if more follow. */
  private run = 0;
  private continuing?: Buffer;

  /**
   * One piece of a DATA frame (`frameEnd` on its last); returns what to push now — the piece
   * itself, or the frame (up to FRAME_JOIN_MAX) joined — or undefined while a frame being joined
   * is incomplete. `readerKeepsUp`: the reader takes each chunk as it is pushed.
   */
  take(piece: Buffer, frameEnd: boolean, readerKeepsUp: boolean): Buffer | undefined {
    this.midFrame = !frameEnd;
    // A reader that asked for pieces and keeps up: the piece goes on now, marked when the rest of
    // its frame follows.
    if (this.piecesWanted && this.pieces.length === 0 && readerKeepsUp) {
      this.run += piece.length;
      const last = frameEnd || this.run >= FRAME_JOIN_MAX;
      if (last) this.run = 0;
      this.continuing = last ? undefined : piece;
      return piece;
    }
    let chunk = piece;
    if (!frameEnd || this.pieces.length > 0) {
      this.pieces.push(piece);
      this.bytes += piece.length;
      if (!frameEnd && this.run + this.bytes < FRAME_JOIN_MAX) return undefined;
      chunk = this.pieces.length === 1 ? piece : Buffer.concat(this.pieces, this.bytes);
      this.pieces = [];
      this.bytes = 0;
    }
    // The frame (or its part up to FRAME_JOIN_MAX) is complete with this chunk.
    this.run = 0;
    this.continuing = undefined;
    return chunk;
  }

  /** Whether `chunk`, just handed on, is a piece whose frame continues in the next one. */
  continuesAfter(chunk: Buffer): boolean {
    return chunk === this.continuing;
  }
}

/** One DATA frame joined from its pieces, kept to `max` bytes (a peer cannot make us hold 16 MiB). */
export class JoinedFrame {
  private pieces?: Buffer[];
  private bytes = 0;

  constructor(private readonly max: number) {}

  /** One piece (`frameEnd` on its last): the frame, cut at `max`, with its last piece; else undefined. */
  add(piece: Buffer, frameEnd: boolean): Buffer | undefined {
    if (this.bytes < this.max) {
      (this.pieces ??= []).push(piece.subarray(0, this.max - this.bytes));
      this.bytes += piece.length;
    }
    if (!frameEnd) return undefined;
    const frame = Buffer.concat(this.pieces ?? []);
    this.pieces = undefined;
    this.bytes = 0;
    return frame;
  }
}
