// SPDY/3.1 frames on the wire (draft 3.1 §2.2–2.6): parsing a byte stream into frames and
// encoding frames, plus the (uncompressed) header block format. Follows moby/spdystream
// spdy/{types,read,write}.go, the framer kubelet and kubectl use:
//  - control frame: C=1 | version 15 bits | type 16 bits, flags 8 bits | length 24 bits;
//    data frame: C=0 | stream id 31 bits, flags 8 bits (FIN 0x01) | length 24 bits;
//  - types spdystream does not know (5, 10, …) are a session error; SETTINGS, HEADERS and
//    WINDOW_UPDATE are parsed so that the session can ignore them.
// Header blocks travel compressed (header-block.ts); this module only slices them out.

export const SPDY_VERSION = 3;

export const FrameType = {
  SYN_STREAM: 1,
  SYN_REPLY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  HEADERS: 8,
  WINDOW_UPDATE: 9,
} as const;

export const FLAG_FIN = 0x01;
export const FLAG_UNIDIRECTIONAL = 0x02;

export const RstStatus = {
  PROTOCOL_ERROR: 1,
  INVALID_STREAM: 2,
  REFUSED_STREAM: 3,
  UNSUPPORTED_VERSION: 4,
  CANCEL: 5,
  INTERNAL_ERROR: 6,
  FLOW_CONTROL_ERROR: 7,
  STREAM_IN_USE: 8,
  STREAM_ALREADY_CLOSED: 9,
  INVALID_CREDENTIALS: 10,
  FRAME_TOO_LARGE: 11,
} as const;

export const GoAwayStatus = { OK: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2 } as const;

export const MAX_FRAME_PAYLOAD = 0xffffff;
export const MAX_STREAM_ID = 0x7fffffff;

/** Lowercase header names; several values of one name are NUL-joined, as on the wire. */
export type Headers = Record<string, string>;

export type Frame =
  /** A DATA frame or a piece of one (see FrameReader); `end`: this piece completes its frame. */
  | { type: 'data'; streamId: number; fin: boolean; data: Buffer; end: boolean }
  | { type: 'syn_stream'; streamId: number; associatedId: number; priority: number; slot: number; flags: number; block: Buffer }
  | { type: 'syn_reply'; streamId: number; flags: number; block: Buffer }
  | { type: 'headers'; streamId: number; flags: number; block: Buffer }
  | { type: 'rst_stream'; streamId: number; status: number }
  | { type: 'settings'; flags: number; entries: Array<{ flags: number; id: number; value: number }> }
  | { type: 'ping'; id: number }
  | { type: 'goaway'; lastGoodStreamId: number; status: number }
  | { type: 'window_update'; streamId: number; delta: number };

/** Anything that makes the byte stream unusable; the session must end (GOAWAY, close). */
export class SpdyProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpdyProtocolError';
  }
}

/**
 * Accumulates bytes and hands out frames; frames may span any number of chunks. Control frames
 * come out whole. A DATA frame comes out in pieces as its bytes arrive — each piece a slice of a
 * received chunk, never a copy, the frame's FIN on its last piece: through the API server's
 * WebSocket tunnel the SPDY byte stream arrives in messages of up to 32 KiB cut anywhere
 * (streamtunnel.go relays the kubelet connection with io.Copy), so nearly every 32 KiB DATA frame
 * spans two messages, and joining them would copy every byte forwarded.
 */
export class FrameReader {
  private chunks: Buffer[] = [];
  private length = 0;
  /** The DATA frame whose payload is being handed out: its stream, bytes still to come, FIN. */
  private data?: { streamId: number; remaining: number; fin: boolean };

  get buffered(): number {
    return this.length;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** The next frame (or DATA piece), or undefined until more bytes arrive. Throws SpdyProtocolError. */
  next(): Frame | undefined {
    if (this.data) return this.nextPiece(this.data);
    if (this.length < 8) return undefined;
    const head = this.peek(8);
    const length = head.readUInt32BE(4) & 0xffffff;
    const flags = head[4]!;
    const first = head.readUInt32BE(0);
    if ((first & 0x80000000) === 0) {
      const streamId = first & MAX_STREAM_ID;
      if (streamId === 0) throw new SpdyProtocolError('DATA frame on stream 0');
      this.take(8);
      const fin = (flags & FLAG_FIN) !== 0;
      if (length === 0) return { type: 'data', streamId, fin, data: Buffer.alloc(0), end: true };
      this.data = { streamId, remaining: length, fin };
      return this.nextPiece(this.data);
    }
    if (this.length < 8 + length) return undefined;
    this.take(8);
    const payload = this.take(length);
    const version = (first >>> 16) & 0x7fff;
    if (version !== SPDY_VERSION) throw new SpdyProtocolError(`unsupported SPDY version ${version}`);
    return parseControl(first & 0xffff, flags, payload);
  }

  /** What the first chunk holds of the current DATA frame's payload (a slice of it). */
  private nextPiece(data: { streamId: number; remaining: number; fin: boolean }): Frame | undefined {
    if (this.length === 0) return undefined;
    const n = Math.min(this.chunks[0]!.length, data.remaining);
    const piece = this.take(n);
    data.remaining -= n;
    if (data.remaining === 0) this.data = undefined;
    return { type: 'data', streamId: data.streamId, fin: data.remaining === 0 && data.fin, data: piece, end: data.remaining === 0 };
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.chunks, n);
  }

  private take(n: number): Buffer {
    this.length -= n;
    const first = this.chunks[0];
    if (n === 0) return Buffer.alloc(0);
    if (first && first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }
}

function need(payload: Buffer, n: number, what: string): void {
  if (payload.length < n) throw new SpdyProtocolError(`${what} frame too short (${payload.length} bytes)`);
}

function nonZero(id: number, what: string): number {
  if (id === 0) throw new SpdyProtocolError(`${what} on stream 0`);
  return id;
}

function parseControl(type: number, flags: number, p: Buffer): Frame {
  switch (type) {
    case FrameType.SYN_STREAM:
      need(p, 10, 'SYN_STREAM');
      return {
        type: 'syn_stream',
        streamId: nonZero(p.readUInt32BE(0) & MAX_STREAM_ID, 'SYN_STREAM'),
        associatedId: p.readUInt32BE(4) & MAX_STREAM_ID,
        priority: p[8]! >> 5,
        slot: p[9]!,
        flags,
        block: p.subarray(10),
      };
    case FrameType.SYN_REPLY:
    case FrameType.HEADERS:
      need(p, 4, type === FrameType.SYN_REPLY ? 'SYN_REPLY' : 'HEADERS');
      return {
        type: type === FrameType.SYN_REPLY ? 'syn_reply' : 'headers',
        streamId: nonZero(p.readUInt32BE(0) & MAX_STREAM_ID, 'SYN_REPLY'),
        flags,
        block: p.subarray(4),
      };
    case FrameType.RST_STREAM: {
      need(p, 8, 'RST_STREAM');
      const status = p.readUInt32BE(4);
      if (status === 0) throw new SpdyProtocolError('RST_STREAM with status 0');
      return { type: 'rst_stream', streamId: nonZero(p.readUInt32BE(0) & MAX_STREAM_ID, 'RST_STREAM'), status };
    }
    case FrameType.SETTINGS: {
      need(p, 4, 'SETTINGS');
      const n = p.readUInt32BE(0);
      need(p, 4 + n * 8, 'SETTINGS');
      const entries = [];
      for (let i = 0; i < n; i++) {
        const w = p.readUInt32BE(4 + i * 8);
        entries.push({ flags: w >>> 24, id: w & 0xffffff, value: p.readUInt32BE(8 + i * 8) });
      }
      return { type: 'settings', flags, entries };
    }
    case FrameType.PING:
      need(p, 4, 'PING');
      if (flags !== 0) throw new SpdyProtocolError('PING with flags');
      return { type: 'ping', id: nonZero(p.readUInt32BE(0), 'PING') };
    case FrameType.GOAWAY:
      if (p.length !== 8 || flags !== 0) throw new SpdyProtocolError('invalid GOAWAY frame');
      return { type: 'goaway', lastGoodStreamId: p.readUInt32BE(0) & MAX_STREAM_ID, status: p.readUInt32BE(4) };
    case FrameType.WINDOW_UPDATE:
      if (p.length !== 8 || flags !== 0) throw new SpdyProtocolError('invalid WINDOW_UPDATE frame');
      return { type: 'window_update', streamId: p.readUInt32BE(0) & MAX_STREAM_ID, delta: p.readUInt32BE(4) & MAX_STREAM_ID };
    default:
      throw new SpdyProtocolError(`unknown control frame type ${type}`);
  }
}

function controlHeader(type: number, flags: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(8 + length);
  b.writeUInt32BE((0x80000000 | (SPDY_VERSION << 16) | type) >>> 0, 0);
  b.writeUInt32BE(((flags << 24) | length) >>> 0, 4);
  return b;
}

/** The 8-byte header of a DATA frame carrying `length` bytes. */
export function dataFrameHeader(streamId: number, length: number, fin: boolean): Buffer {
  if (length > MAX_FRAME_PAYLOAD) throw new RangeError(`DATA frame of ${length} bytes`);
  const b = Buffer.allocUnsafe(8);
  b.writeUInt32BE(streamId & MAX_STREAM_ID, 0);
  b.writeUInt32BE((((fin ? FLAG_FIN : 0) << 24) | length) >>> 0, 4);
  return b;
}

export function encodeData(streamId: number, data: Buffer, fin: boolean): Buffer {
  const b = Buffer.allocUnsafe(8 + data.length);
  dataFrameHeader(streamId, data.length, fin).copy(b, 0);
  data.copy(b, 8);
  return b;
}

/** `block` is the compressed header block (HeaderCompressor.compress). */
export function encodeSynStream(streamId: number, block: Buffer, opts: { flags?: number; associatedId?: number; priority?: number } = {}): Buffer {
  const b = controlHeader(FrameType.SYN_STREAM, opts.flags ?? 0, 10 + block.length);
  b.writeUInt32BE(streamId & MAX_STREAM_ID, 8);
  b.writeUInt32BE((opts.associatedId ?? 0) & MAX_STREAM_ID, 12);
  b[16] = ((opts.priority ?? 0) & 7) << 5;
  b[17] = 0;
  block.copy(b, 18);
  return b;
}

export function encodeSynReply(streamId: number, block: Buffer, flags = 0): Buffer {
  const b = controlHeader(FrameType.SYN_REPLY, flags, 4 + block.length);
  b.writeUInt32BE(streamId & MAX_STREAM_ID, 8);
  block.copy(b, 12);
  return b;
}

export function encodeRstStream(streamId: number, status: number): Buffer {
  const b = controlHeader(FrameType.RST_STREAM, 0, 8);
  b.writeUInt32BE(streamId & MAX_STREAM_ID, 8);
  b.writeUInt32BE(status >>> 0, 12);
  return b;
}

export function encodePing(id: number): Buffer {
  const b = controlHeader(FrameType.PING, 0, 4);
  b.writeUInt32BE(id >>> 0, 8);
  return b;
}

export function encodeGoAway(lastGoodStreamId: number, status: number = GoAwayStatus.OK): Buffer {
  const b = controlHeader(FrameType.GOAWAY, 0, 8);
  b.writeUInt32BE(lastGoodStreamId & MAX_STREAM_ID, 8);
  b.writeUInt32BE(status >>> 0, 12);
  return b;
}

export function encodeSettings(entries: Array<{ flags?: number; id: number; value: number }>, flags = 0): Buffer {
  const b = controlHeader(FrameType.SETTINGS, flags, 4 + entries.length * 8);
  b.writeUInt32BE(entries.length, 8);
  entries.forEach((e, i) => {
    b.writeUInt32BE((((e.flags ?? 0) << 24) | (e.id & 0xffffff)) >>> 0, 12 + i * 8);
    b.writeUInt32BE(e.value >>> 0, 16 + i * 8);
  });
  return b;
}

export function encodeWindowUpdate(streamId: number, delta: number): Buffer {
  const b = controlHeader(FrameType.WINDOW_UPDATE, 0, 8);
  b.writeUInt32BE(streamId & MAX_STREAM_ID, 8);
  b.writeUInt32BE(delta & MAX_STREAM_ID, 12);
  return b;
}

/** Frame bytes for an arbitrary control type (tests: unknown types must kill the session). */
export function encodeRawControl(type: number, flags: number, payload: Buffer): Buffer {
  const b = controlHeader(type, flags, payload.length);
  payload.copy(b, 8);
  return b;
}
