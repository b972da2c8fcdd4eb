// A client WebSocket used as a byte stream (the SPDY tunnel, client-go
// tools/portforward/tunneling_connection.go): binary messages in both directions, boundaries
// meaning nothing. Written for the data path: received payload goes to `onData` in pieces as the
// socket delivers it (frame-reader.ts), and each send is one frame built in one buffer
// (frame-writer.ts). Pings from the server are answered, one pong in flight (../pong-pacer.ts);
// the close handshake is RFC 6455 §7: whoever closes first sends a close frame and the other
// echoes it, then TCP closes.
import type net from 'node:net';
import { CloseCode, FrameReader, Opcode, WebSocketProtocolError, type FrameSink } from './frame-reader.js';
import { encodeClientFrame, type MaskKeys } from './frame-writer.js';
import { PongPacer } from '../pong-pacer.js';
import type { SlabReads } from './slab-reads.js';

/** How long we wait for the server's close frame (and its FIN) after sending ours. */
const CLOSE_WAIT_MS = 2000;

/** How a WebSocket ended: `code` 1000 is a clean end; `error` says what went wrong otherwise. */
export interface WebSocketEnd {
  code: number;
  error?: Error;
}

export class ByteWebSocket {
  /** Each piece of received payload, in order (never empty). */
  onData: (piece: Buffer) => void = () => undefined;
  /** Anything arrived (payload, ping, pong): the peer is alive. */
  onHeard: () => void = () => undefined;
  private readonly closeListeners: Array<(end: WebSocketEnd) => void> = [];
  private readonly reader: FrameReader;
  private closeSent = false;
  private ended?: WebSocketEnd;
  private closeTimer?: NodeJS.Timeout;
  private readonly pongs = new PongPacer((payload, done) => this.sendControl(Opcode.PONG, payload, done));

  constructor(
    private readonly socket: net.Socket,
    head: Buffer,
    private readonly keys: MaskKeys,
    /** The socket reads into these (slab-reads.ts) instead of emitting 'data'. */
    reads?: SlabReads,
  ) {
    const sink: FrameSink = {
      binary: (piece) => this.onData(piece),
      ping: (payload) => this.pongs.ping(payload),
      pong: () => undefined,
      close: (code, reason) => this.closeReceived(code, reason),
    };
    this.reader = new FrameReader(sink);
    socket.setNoDelay(true);
    // Bytes the server sent right behind its 101 come first.
    if (reads) reads.attach(head, (piece) => this.receive(piece));
    else {
      if (head.length > 0) socket.unshift(head);
      socket.on('data', (chunk: Buffer) => this.receive(chunk));
    }
    socket.on('error', (err) => this.finish({ code: CloseCode.ABNORMAL, error: err }));
    socket.on('close', () => {
      clearTimeout(this.closeTimer);
      this.finish({ code: CloseCode.ABNORMAL, error: new Error('the connection dropped without a close frame (1006)') });
    });
    socket.on('end', () => {
      if (!this.ended) socket.end();
    });
  }

  get isOpen(): boolean {
    return !this.closeSent && !this.ended && !this.socket.destroyed;
  }

  /** Bytes written but not yet handed to the kernel. */
  get bufferedAmount(): number {
    return this.socket.writableLength;
  }

  get isPaused(): boolean {
    return this.socket.isPaused();
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** Calls `listener` once when the WebSocket is over (at once if it is). */
  onClose(listener: (end: WebSocketEnd) => void): void {
    if (this.ended) listener(this.ended);
    else this.closeListeners.push(listener);
  }

  offClose(listener: (end: WebSocketEnd) => void): void {
    const i = this.closeListeners.indexOf(listener);
    if (i >= 0) this.closeListeners.splice(i, 1);
  }

  /** One binary message of `pieces` (`total` bytes); `cb` once it is handed to the socket. */
  send(pieces: readonly Buffer[], total: number, cb?: (err?: Error | null) => void): void {
    if (!this.isOpen) return;
    this.socket.write(encodeClientFrame(Opcode.BINARY, pieces, total, this.keys), cb);
  }

  /** Starts the close handshake; the socket closes when the server echoes (or after CLOSE_WAIT_MS). */
  close(code: number = CloseCode.NORMAL): void {
    if (this.closeSent || this.ended) return;
    this.sendClose(code);
    this.destroySoon();
  }

  /** Drops the connection at once. */
  terminate(): void {
    this.socket.destroy();
  }

  private receive(chunk: Buffer): void {
    if (this.ended) return;
    this.onHeard();
    try {
      this.reader.push(chunk);
    } catch (err) {
      // A framing violation closes with its code; anything else thrown on the way (a bug behind
      // onData) fails this connection with 1011 rather than the whole process.
      const code = err instanceof WebSocketProtocolError ? err.closeCode : CloseCode.INTERNAL_ERROR;
      if (!this.closeSent) this.sendClose(code);
      this.finish({ code, error: err instanceof Error ? err : new Error(String(err)) });
      this.socket.destroy();
    }
  }

  private closeReceived(code: number | undefined, reason: string): void {
    const received = code ?? CloseCode.NO_STATUS;
    // Echo the code (§5.5.1); a close without a code is answered with an empty close.
    if (!this.closeSent) this.sendClose(code);
    const error =
      received === CloseCode.NORMAL ? undefined : new Error(`the server closed the WebSocket (${received}${reason ? `: ${reason.slice(0, 120)}` : ''})`);
    this.finish(error ? { code: received, error } : { code: received });
    // The server closes TCP first (§7.1.1); our FIN follows its.
    this.socket.end();
    this.destroySoon();
  }

  /** The socket is destroyed if the server has not closed it within CLOSE_WAIT_MS. */
  private destroySoon(): void {
    clearTimeout(this.closeTimer);
    this.closeTimer = setTimeout(() => this.socket.destroy(), CLOSE_WAIT_MS);
    this.closeTimer.unref();
  }

  private sendClose(code: number | undefined): void {
    this.closeSent = true;
    const body = code === undefined ? Buffer.alloc(0) : Buffer.from([code >> 8, code & 0xff]);
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(encodeClientFrame(Opcode.CLOSE, [body], body.length, this.keys));
  }

  /** Whether the frame was written; `done` once the socket has taken it. */
  private sendControl(opcode: number, payload: Buffer, done: () => void): boolean {
    if (!(this.isOpen && this.socket.writable)) return false;
    this.socket.write(encodeClientFrame(opcode, [payload], payload.length, this.keys), () => done());
    return true;
  }

  private finish(end: WebSocketEnd): void {
    if (this.ended) return;
    this.ended = end;
    for (const l of this.closeListeners.splice(0)) l(end);
  }
}
