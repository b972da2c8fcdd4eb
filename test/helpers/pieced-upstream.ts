// An upstream that gives piece hints, as a SPDY port-forward stream does (core/stream-pieces.ts):
// for the tests of the relay and of the wrappers between a transport and the relay.
import { Duplex } from 'node:stream';
import type { PieceHints, UpstreamStream } from '../../src/core/stream-pieces.js';

/**
 * An upstream whose chunks come in units cut into pieces, as SPDY DATA frames reach the proxy
 * (core/stream-pieces.ts): `piece(bytes, more)` pushes one, `more` saying the unit continues.
 */
export class PiecedUpstream extends Duplex implements UpstreamStream, PieceHints {
  private readonly continuing = new WeakSet<Buffer>();
  piecesAsked = false;
  constructor() {
    super({ allowHalfOpen: true });
  }
  get pieces(): PieceHints {
    return this;
  }
  handPiecesOn(): void {
    this.piecesAsked = true;
  }
  piece(bytes: Buffer, more: boolean): boolean {
    if (more) this.continuing.add(bytes);
    return this.push(bytes);
  }
  continuesAfter(chunk: Buffer): boolean {
    return this.continuing.has(chunk);
  }
  /** Called once when the reader wants more (a producer held back by push() returning false). */
  onRead?: () => void;
  override _read(): void {
    const wake = this.onRead;
    this.onRead = undefined;
    wake?.();
  }
  override _write(_chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    cb();
  }
}
