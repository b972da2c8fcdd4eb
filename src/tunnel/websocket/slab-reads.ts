// A TLS socket read into slabs of our own (tls.connect's `onread`, Node's net.Socket onread): the
// decrypted bytes land one after another in a slab and each read is handed on as a slice of it.
// Without it Node allocates a buffer per TLS record and pushes it through the Readable
// machinery: 4–7 % more CPU per GiB downloaded through the API server (docs/performance.md). No
// part of a slab is ever written twice, so a slice stays valid for as long as anything holds it (a
// corked write, a frame waiting for its rest); a slab is freed with its last slice.

/** Room for at least one TLS record (Node's TLS layer hands on at most 16 KiB per read). */
const MIN_ROOM = 16 * 1024;
/** Under glibc's default mmap threshold (128 KiB), so a slab comes from the heap, not its own mapping. */
const SLAB_BYTES = 120 * 1024;

export class SlabReads {
  private slab = Buffer.allocUnsafe(0);
  private used = 0;
  /** Where reads go: the handshake's stream first, then a queue, then the WebSocket. */
  private sink: (piece: Buffer) => void;
  private queued: Buffer[] = [];

  /** For tls.connect({ onread }). */
  readonly onread = {
    buffer: (): Buffer => this.room(),
    callback: (bytes: number, into: Buffer): void => {
      this.used += bytes;
      this.sink(into.subarray(0, bytes));
    },
  };

  constructor(handshake: (piece: Buffer) => void) {
    this.sink = handshake;
  }

  /** The handshake is over: reads are kept until attach(). */
  hold(): void {
    this.sink = (piece) => this.queued.push(piece);
  }

  /**
   * From the next tick (the caller wires its own handlers first): `first` (bytes that came behind
   * the handshake), what was kept meanwhile, then every read as it comes, in order.
   */
  attach(first: Buffer, consumer: (piece: Buffer) => void): void {
    if (first.length > 0) this.queued.unshift(first);
    process.nextTick(() => {
      for (const piece of this.queued.splice(0)) consumer(piece);
      this.sink = consumer;
    });
  }

  private room(): Buffer {
    if (this.slab.length - this.used < MIN_ROOM) {
      this.slab = Buffer.allocUnsafe(SLAB_BYTES);
      this.used = 0;
    }
    return this.slab.subarray(this.used);
  }
}
