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
// few dozen bytes per stream, so compressing them would save nothing worth a thread-pool hop.
//
// Reading: Node's zlib inflate (the peer compresses for real), fed block by block in order; the
// output of a sync flush is exactly that block's bytes.
import zlib from 'node:zlib';
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

/** Decompresses the peer's header blocks in order; one inflate context for the session. */
export class HeaderDecompressor {
  // Every write is inflated with Z_SYNC_FLUSH (one pass through the thread pool per block, where
  // write + flush() took two). The output arrives as 'data' before the write's callback, as
  // ws's permessage-deflate relies on for flush().
  private readonly inflate = zlib.createInflate({ dictionary: SPDY_DICTIONARY, flush: zlib.constants.Z_SYNC_FLUSH });
  private out: Buffer[] = [];
  private outLength = 0;
  private tail: Promise<unknown> = Promise.resolve();
  private failed?: Error;
  private onFail?: (err: Error) => void;

  constructor() {
    this.inflate.on('data', (chunk: Buffer) => {
      this.out.push(chunk);
      this.outLength += chunk.length;
    });
    this.inflate.on('error', (err: Error) => this.fail(new Error(`header block does not decompress: ${err.message}`)));
  }

  /**
   * Resolves with the uncompressed bytes; calls are served strictly in order. `compressed` may be
   * several consecutive blocks: the output is then those header blocks back to back.
   */
  decompress(compressed: Buffer): Promise<Buffer> {
    const run = () => this.run(compressed);
    const p = this.tail.then(run, run);
    this.tail = p.catch(() => undefined);
    return p;
  }

  close(): void {
    this.failed ??= new Error('session closed');
    this.inflate.close();
  }

  private run(compressed: Buffer): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      if (this.failed) return reject(this.failed);
      this.onFail = reject;
      this.inflate.write(compressed, () => {
        this.onFail = undefined;
        if (this.failed) return reject(this.failed);
        const block = this.out.length === 1 ? this.out[0]! : Buffer.concat(this.out, this.outLength);
        this.out = [];
        this.outLength = 0;
        if (block.length > MAX_HEADER_BLOCK) return reject(this.fail(new Error(`header block of ${block.length} bytes is too large`)));
        resolve(block);
      });
    });
  }

  private fail(err: Error): Error {
    this.failed ??= err;
    this.onFail?.(this.failed);
    this.onFail = undefined;
    return this.failed;
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
  const { headers, end } = parseHeaderBlock(block, 0);
  if (end !== block.length) throw new SpdyProtocolError(`header block has ${block.length - end} trailing bytes`);
  return headers;
}

/** Parses `count` header blocks that follow each other (several frames inflated at once). */
export function decodeHeaderBlocks(data: Buffer, count: number): Headers[] {
  const out: Headers[] = [];
  let off = 0;
  for (let i = 0; i < count; i++) {
    const { headers, end } = parseHeaderBlock(data, off);
    out.push(headers);
    off = end;
  }
  if (off !== data.length) throw new SpdyProtocolError(`header blocks have ${data.length - off} trailing bytes`);
  return out;
}

function parseHeaderBlock(block: Buffer, start: number): { headers: Headers; end: number } {
  let off = start;
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
