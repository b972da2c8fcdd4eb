// The server's WebSocket frames, read by a client (RFC 6455 §5.2 base framing, §5.4 fragmentation,
// §5.5 control frames, §7.4 close codes). Binary payload is handed out as it arrives, in pieces
// that are slices of the socket's chunks: never joined into messages. The SPDY tunnel treats its
// binary messages as one byte stream (client-go tools/portforward/tunneling_connection.go), and the
// API server cuts them wherever its reads of the kubelet's connection end, so joining a message
// (what `ws` does before it emits one) would copy every byte forwarded for nothing.
//
// Strict where the RFC says MUST: frames from a server are never masked, RSV bits are 0 (no
// extension is negotiated), control frames are final and ≤ 125 bytes, continuation frames belong
// to a fragmented message and nothing else interrupts one but control frames.

export const Opcode = { CONTINUATION: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa } as const;

/** Close codes (RFC 6455 §7.4.1) this side sends. */
export const CloseCode = { NORMAL: 1000, PROTOCOL_ERROR: 1002, UNSUPPORTED_DATA: 1003, NO_STATUS: 1005, ABNORMAL: 1006, INTERNAL_ERROR: 1011 } as const;

/** The server broke the framing rules: the connection must fail with `closeCode`. */
export class WebSocketProtocolError extends Error {
  constructor(
    message: string,
    readonly closeCode: number,
  ) {
    super(message);
    this.name = 'WebSocketProtocolError';
  }
}

export interface FrameSink {
  /** A piece of a binary message's payload, never empty. */
  binary(piece: Buffer): void;
  ping(payload: Buffer): void;
  pong(payload: Buffer): void;
  /** `code` is undefined when the close frame had no body (1005 to the application). */
  close(code: number | undefined, reason: string): void;
}

const CONTROL_MAX = 125;
/** The longest header a server frame has: 2 bytes, then an extended 64-bit length (no mask key). */
const HEADER_MAX = 10;

/** Close codes a peer may send (§7.4.1, §7.4.2): 1000–1014 less the reserved ones, and 3000–4999. */
export function isValidCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
}

export class FrameReader {
  private readonly header = Buffer.alloc(HEADER_MAX);
  private headerHave = 0;
  private headerNeed = 2;
  /** Payload bytes of the current frame still to come; -1 while reading a header. */
  private left = -1;
  private opcode = 0;
  private fin = false;
  /** The opcode of the fragmented message in progress (TEXT or BINARY), or 0 for none. */
  private message = 0;
  private control: Buffer[] = [];
  /** After a close frame nothing more is read (§5.5.1). */
  private closed = false;

  constructor(private readonly sink: FrameSink) {}

  /** Parses one chunk from the socket; throws WebSocketProtocolError on a framing violation. */
  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.closed) {
      if (this.left < 0) {
        const take = Math.min(this.headerNeed - this.headerHave, chunk.length - at);
        chunk.copy(this.header, this.headerHave, at, at + take);
        this.headerHave += take;
        at += take;
        if (this.headerHave === this.headerNeed) this.parseHeader();
        continue;
      }
      const take = Math.min(this.left, chunk.length - at);
      this.payload(chunk.subarray(at, at + take));
      at += take;
      this.left -= take;
      if (this.left === 0) this.frameDone();
    }
  }

  private parseHeader(): void {
    const h = this.header;
    if (this.headerHave === 2) {
      if (h[1]! & 0x80) throw new WebSocketProtocolError('the server sent a masked frame', CloseCode.PROTOCOL_ERROR);
      const len7 = h[1]! & 0x7f;
      const extended = len7 === 126 ? 2 : len7 === 127 ? 8 : 0;
      if (extended > 0) {
        this.headerNeed = 2 + extended;
        return;
      }
    }
    const b0 = h[0]!;
    if (b0 & 0x70) throw new WebSocketProtocolError('the server set reserved bits (no extension was negotiated)', CloseCode.PROTOCOL_ERROR);
    this.fin = (b0 & 0x80) !== 0;
    this.opcode = b0 & 0x0f;
    const len7 = h[1]! & 0x7f;
    let length = len7;
    if (len7 === 126) length = h.readUInt16BE(2);
    else if (len7 === 127) {
      const high = h.readUInt32BE(2);
      // The most significant bit MUST be 0; beyond 2^53 a length is not a safe integer here.
      if (high > 0x1fffff) throw new WebSocketProtocolError('the server sent a frame longer than 2^53 bytes', CloseCode.PROTOCOL_ERROR);
      length = high * 2 ** 32 + h.readUInt32BE(6);
    }
    this.checkOpcode(length);
    this.headerHave = 0;
    this.headerNeed = 2;
    this.left = length;
    if (length === 0) this.frameDone();
  }

  private checkOpcode(length: number): void {
    const op = this.opcode;
    if (op >= Opcode.CLOSE) {
      if (op > Opcode.PONG) throw new WebSocketProtocolError(`the server sent a frame with unknown opcode ${op}`, CloseCode.PROTOCOL_ERROR);
      if (!this.fin) throw new WebSocketProtocolError('the server fragmented a control frame', CloseCode.PROTOCOL_ERROR);
      if (length > CONTROL_MAX)
        throw new WebSocketProtocolError(`the server sent a control frame of ${length} bytes (at most ${CONTROL_MAX})`, CloseCode.PROTOCOL_ERROR);
      return;
    }
    if (op === Opcode.CONTINUATION) {
      if (this.message === 0) throw new WebSocketProtocolError('the server sent a continuation frame outside a message', CloseCode.PROTOCOL_ERROR);
    } else if (op === Opcode.TEXT || op === Opcode.BINARY) {
      if (this.message !== 0) throw new WebSocketProtocolError('the server began a message inside another', CloseCode.PROTOCOL_ERROR);
      this.message = op;
    } else throw new WebSocketProtocolError(`the server sent a frame with unknown opcode ${op}`, CloseCode.PROTOCOL_ERROR);
    if (this.message === Opcode.TEXT) throw new WebSocketProtocolError('the server sent a text message on a binary byte stream', CloseCode.UNSUPPORTED_DATA);
  }

  private payload(piece: Buffer): void {
    if (this.opcode >= Opcode.CLOSE) this.control.push(piece);
    else if (piece.length > 0) this.sink.binary(piece);
  }

  private frameDone(): void {
    this.left = -1;
    const op = this.opcode;
    if (op < Opcode.CLOSE) {
      if (this.fin) this.message = 0;
      return;
    }
    // Control payloads are ≤ 125 bytes: joining them costs nothing.
    const body = this.control.length === 1 ? this.control[0]! : Buffer.concat(this.control);
    this.control = [];
    if (op === Opcode.PING) this.sink.ping(body);
    else if (op === Opcode.PONG) this.sink.pong(body);
    else this.closeFrame(body);
  }

  private closeFrame(body: Buffer): void {
    this.closed = true;
    if (body.length === 0) return this.sink.close(undefined, '');
    if (body.length === 1) throw new WebSocketProtocolError('the server sent a close frame with a 1-byte body', CloseCode.PROTOCOL_ERROR);
    const code = body.readUInt16BE(0);
    if (!isValidCloseCode(code)) throw new WebSocketProtocolError(`the server sent close code ${code}, which no endpoint may send`, CloseCode.PROTOCOL_ERROR);
    this.sink.close(code, body.subarray(2).toString('utf8'));
  }
}
