// SPDY header blocks (draft 3.1 §2.6.10): the format — uint32 count, then per header uint32 length
// + name, uint32 length + value (several values NUL-joined); names must be lowercase, and a block
// with an uppercase or a duplicate name fails the session, as in spdystream's parseHeaderValueBlock —
// and the compression for one session: each direction is ONE zlib
// stream for the whole session, primed with the SPDY/3 dictionary, and every header block ends
// on a sync-flush boundary so the peer can decode it on its own. Follows moby/spdystream
// spdy/{write,read}.go (zlib.NewWriterLevelDict + Flush per block; one zlib.NewReaderDict fed
// exactly each frame's payload through a LimitedReader).
//
// Writing: we emit "stored" (uncompressed) deflate blocks, which any inflater accepts, followed by
// the same empty stored block (00 00 00 ff ff) that Z_SYNC_FLUSH appends. Go's flate reader only
// hands out a block's bytes once it has read the next block header, so that marker is required:
// without it spdystream would read past the frame and fail the session. Header blocks here are a
// few dozen bytes per stream, so compressing them would save next to nothing.
//
// Reading: a real inflater (the peer compresses for real: Go's zlib at BestCompression), fed block
// by block in order; the output of a sync flush is exactly that block's bytes.
import { Inflate, Z_SYNC_FLUSH } from 'pako';
import { DICTIONARY_ADLER32, SPDY_DICTIONARY } from './dictionary.js';
import { SpdyProtocolError, type Headers } from './framer.js';

/** A decoded header block larger than this is a protocol error (spdystream has no limit; we do). */
export const MAX_HEADER_BLOCK = 1 << 20;
const STORED_MAX = 0xffff;
const SYNC_MARKER = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);

/** zlib header: CMF 0x78 (deflate, 32 KiB window), FLG 0x20 (FDICT; FLEVEL 0; FCHECK 0), DICTID. */
function zlibHeader(): Buffer {
  const h = Buffer.alloc(6);
  h[0] = 0x78;
  h[1] = 0x20;
  h.writeUInt32BE(DICTIONARY_ADLER32, 2);
  return h;
}

export class HeaderCompressor {
  private started = false;

  /** The bytes to put in a frame for this (uncompressed) header block. Synchronous. */
  compress(block: Buffer): Buffer {
    const parts: Buffer[] = [];
    if (!this.started) {
      parts.push(zlibHeader());
      this.started = true;
    }
    for (let off = 0; off < block.length; off += STORED_MAX) {
      const chunk = block.subarray(off, off + STORED_MAX);
      const head = Buffer.alloc(5);
      head[0] = 0x00; // BFINAL 0, BTYPE 00 (stored), padded to the byte boundary
      head.writeUInt16LE(chunk.length, 1);
      head.writeUInt16LE(~chunk.length & 0xffff, 3);
      parts.push(head, chunk);
    }
    parts.push(SYNC_MARKER);
    return Buffer.concat(parts);
  }
}

/**
 * Decompresses the peer's header blocks in order; one inflate context for the session. pako's
 * inflate (a port of zlib) runs synchronously: Node's zlib streams only inflate through the
 * thread pool, and a header block of a few dozen bytes cost a round trip to a worker thread and
 * back (two context switches and a loop wake-up, twice per port-forward connection).
 */
export class HeaderDecompressor {
  // Output comes in chunks of this size: a block is usually a few dozen bytes, and pako allocates
  // a whole chunk for every block it decodes.
  private readonly inflate = new Inflate({ dictionary: SPDY_DICTIONARY, chunkSize: 1024 });
  private out: Uint8Array[] = [];
  private outLength = 0;
  private failed?: Error;

  constructor() {
    this.inflate.onData = (chunk: Uint8Array) => {
      this.outLength += chunk.length;
      // Thrown out of push(): the session fails and this inflater is never used again.
      if (this.outLength > MAX_HEADER_BLOCK) throw new Error(`header block of more than ${MAX_HEADER_BLOCK} bytes`);
      this.out.push(chunk);
    };
  }

  /**
   * The uncompressed bytes of `compressed` (one block, or several consecutive blocks: then those
   * header blocks back to back). Throws when the bytes do not inflate; the context is then dead.
   */
  decompress(compressed: Buffer): Buffer {
    if (this.failed) throw this.failed;
    try {
      if (!this.inflate.push(compressed, Z_SYNC_FLUSH)) throw new Error(this.inflate.msg || `inflate error ${this.inflate.err}`);
      // A deflate stream that ended (a final block) decodes nothing more: later blocks would be lost.
      if (this.inflate.ended) throw new Error('the compressed stream ended');
    } catch (err) {
      this.out = [];
      this.failed = new SpdyProtocolError(`header block does not decompress: ${(err as Error).message}`);
      throw this.failed;
    }
    const parts = this.out;
    const length = this.outLength;
    this.out = [];
    this.outLength = 0;
    return parts.length === 1 ? Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, length) : Buffer.concat(parts, length);
  }
}

/** Uncompressed header block; names are lowercased as spdystream does on write. */
export function encodeHeaderBlock(headers: Headers): Buffer {
  const entries = Object.entries(headers);
  const parts: Buffer[] = [];
  const count = Buffer.allocUnsafe(4);
  count.writeUInt32BE(entries.length);
  parts.push(count);
  for (const [name, value] of entries) {
    for (const s of [name.toLowerCase(), value]) {
      const bytes = Buffer.from(s, 'utf8');
      const len = Buffer.allocUnsafe(4);
      len.writeUInt32BE(bytes.length);
      parts.push(len, bytes);
    }
  }
  return Buffer.concat(parts);
}

/** Parses an uncompressed header block; it must be consumed exactly. */
export function decodeHeaderBlock(block: Buffer): Headers {
  const { headers, end } = parseHeaderBlock(block);
  if (end !== block.length) throw new SpdyProtocolError(`header block has ${block.length - end} trailing bytes`);
  return headers;
}

function parseHeaderBlock(block: Buffer): { headers: Headers; end: number } {
  let off = 0;
  const u32 = (what: string): number => {
    if (off + 4 > block.length) throw new SpdyProtocolError(`header block truncated (${what})`);
    const v = block.readUInt32BE(off);
    off += 4;
    return v;
  };
  const str = (what: string): string => {
    const n = u32(what);
    if (off + n > block.length) throw new SpdyProtocolError(`header block truncated (${what})`);
    const s = block.toString('utf8', off, off + n);
    off += n;
    return s;
  };
  const count = u32('count');
  const headers: Headers = Object.create(null) as Headers;
  for (let i = 0; i < count; i++) {
    const name = str('name');
    if (name !== name.toLowerCase()) throw new SpdyProtocolError(`header name "${name}" is not lowercase`);
    if (Object.prototype.hasOwnProperty.call(headers, name)) throw new SpdyProtocolError(`header "${name}" appears twice`);
    headers[name] = str('value');
  }
  return { headers, end: off };
}
